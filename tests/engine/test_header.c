/* test_header.c - vit.h compiles on its own as strict C11 (-std=c11 -pedantic
 * -Werror, see CMakeLists.txt), with nothing included before it, and what it
 * declares links against the engine (whisper.cpp's tests/test-c.c). */
#include "vit.h"

int main(void) {
    Vit vit = {0};
    VitRun run = {0};
    VitImage img = {0};
    VitError err = {VIT_OK, ""};
    VitLoadOptions opt = {0, NULL, 0, 0, 0, NULL};
    VitFusion fusion = VIT_FUSE_MIN;
    VitBlock block = {0};
    (void)opt;
    (void)block;
    (void)err;
    vit_image_free(&img);
    vit_run_free(&run);
    vit_free(&vit);
    return vit_status_name(VIT_OK)[0] == 'o' && vit_fusion_name(fusion)[0] == 'm' &&
                   VIT_MAX_HEADER_BYTES > 0 && VIT_LABEL_BYTES > 1
               ? 0
               : 1;
}
