/* stb_write.c - stb_image_write for the image files test_image writes (the
 * engine compiles only the reader). Built without UBSan's shift check when
 * sanitizing: stb's JPEG writer shifts its int bit buffer past INT_MAX
 * (stbiw__jpg_writeBits), which is stb's business, not the engine's. */
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
