/* vit/image.h - images, preprocessing, labels and predictions. Part of vit.h, which includes
 * every part (and the overview: shapes, token order, the families loaded); include that. */
#ifndef VIT_IMAGE_H
#define VIT_IMAGE_H

#include "vit/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Images and preprocessing */

typedef struct {
    int w, h;           /* px, once turned upright (w and h swap for orientations 5..8) */
    uint8_t *rgb;       /* [h, w, 3], owned (free with vit_image_free) */
    int orientation;    /* 1..8: the file's EXIF orientation tag (TIFF: its Orientation
                         * tag), 1 when it has none; applied to rgb unless
                         * VitImageOptions.ignore_orientation (HEIF/AVIF: see below) */
    const char *format; /* static: "JPEG", "PNG", "WebP", "TIFF", "HEIF", "AVIF", "BMP",
                         * "GIF", "TGA", "PSD", "HDR", "PIC", "PNM"; "RGB" from
                         * vit_image_from_rgb */
} VitImage;

typedef struct {
    int ignore_orientation; /* 1: the pixels as stored, not turned by the EXIF orientation
                             * (nor by HEIF's irot/imir): what PIL's Image.open and timm
                             * give, for parity with a pipeline that does not turn */
} VitImageOptions;

/* Decode an image file to 8-bit RGB, as Pillow's Image.open(path).convert('RGB')
 * gives it, then turn it upright as its EXIF orientation says (Pillow's
 * ImageOps.exif_transpose): the picture a viewer shows is the one the model sees.
 * The decoder is picked by the file's first bytes:
 *   JPEG        libjpeg-turbo with Pillow's settings (islow DCT, fancy upsampling;
 *               grey replicated; CMYK/YCCK read Adobe-inverted and made RGB by
 *               Pillow's formula): the same pixels as Pillow on the same libjpeg
 *   WebP        libwebp, first frame of an animation, alpha dropped: Pillow's pixels
 *   TIFF        libtiff's RGBA interface, first image: Pillow's pixels for 8-bit RGB,
 *               RGBA, grey, palette and bilevel TIFFs, raw, LZW, deflate, PackBits, G4
 *               (tested); 16-bit samples are rounded to 8 bits by libtiff (Pillow keeps
 *               the high byte: up to one level apart), CMYK and YCbCr by libtiff's
 *               formulas (not compared with Pillow's)
 *   HEIF, AVIF  libheif, primary image; libheif applies the file's own rotation and
 *               mirroring (irot/imir boxes, which the HEIF standard puts before EXIF),
 *               so the EXIF tag is reported in orientation but not applied on top
 *   other       stb_image: PNG (exact), BMP, GIF (first frame), TGA, PSD, HDR, PIC,
 *               PNM; 16-bit samples keep their most significant byte
 * The orientation comes from a JPEG's first EXIF APP1 segment, a WebP's EXIF chunk, a
 * TIFF's Orientation tag (read with libexif, libtiff); PNG's eXIf is not read. PIL's
 * Image.open ignores it for JPEG and WebP (timm sees such a photo sideways; pass
 * ignore_orientation to match), while Pillow 9.4 turns a TIFF when it loads it, as the
 * default here does (its exif_transpose then turns a TIFF twice).
 * The declared size is checked before decoding: more than VIT_MAX_IMAGE_PIXELS (or
 * empty) is VIT_ERR_IMAGE, as is every decoder's error (truncated, corrupt,
 * unsupported: the message names the file and says what; libraries never print).
 * Refused besides: JPEGs with 2 components, 12-bit, or over 500 scans; files over
 * 1 GiB. Errors: VIT_ERR_IO (cannot open), VIT_ERR_IMAGE, VIT_ERR_NOMEM. On error
 * *img is zeroed. Free with vit_image_free. opt may be NULL (the defaults: turned). */
VitStatus vit_image_load_with(VitImage *img, const char *path, const VitImageOptions *opt,
                              VitError *err);
/* vit_image_load_with(img, path, NULL, err). */
VitStatus vit_image_load(VitImage *img, const char *path, VitError *err);
/* A copy of rgb [h, w, 3] (orientation 1, format "RGB"). Errors: VIT_ERR_IMAGE (empty
 * or over VIT_MAX_IMAGE_PIXELS), VIT_ERR_NOMEM. */
VitStatus vit_image_from_rgb(VitImage *img, const uint8_t *rgb, int w, int h, VitError *err);
void vit_image_free(VitImage *img);

/* timm's eval transform (timm/data/transforms_factory.py,
 * transforms_imagenet_eval), scale = (floor(Sh / crop_pct), floor(Sw / crop_pct)):
 *   center, square input:  Resize(scale) of the shorter side, PIL bicubic
 *   center, Sh != Sw:      ResizeKeepRatio(scale): both sides times
 *                          min(scale_h / h, scale_w / w), rounded, PIL bilinear
 *                          (timm passes no interpolation there)
 *   squash:                Resize((scale_h, scale_w)), PIL bicubic
 * then CenterCrop((Sh, Sw)) as torchvision rounds it, ToTensor (/255),
 * Normalize(mean, std). Pillow's filters are reproduced bit-exactly, 8-bit
 * passes included. Only the crop of the resize is computed: memory and time
 * grow with Sh, Sw and the image, not with the resized size (a long strip's
 * would be gigabytes). out: [3, Sh, Sw]. crop: the source-image rectangle
 * (px, rounded outwards) that the model sees; any of crop_* may be NULL.
 * Errors: VIT_ERR_NOMEM, VIT_ERR_ARG (empty image). */
VitStatus vit_preprocess(float *out, int *crop_x, int *crop_y, int *crop_w, int *crop_h,
                         const VitConfig *cfg, const VitImage *img, VitError *err);

/* The same resize + centre crop, as 8-bit RGB [Sh, Sw, 3]: the picture the
 * model saw, for drawing. Caller owns out (Sh*Sw*3 bytes). */
VitStatus vit_preprocess_rgb(uint8_t *out, const VitConfig *cfg, const VitImage *img,
                             VitError *err);

/* ---------------------------------------------------------------------------
 * Labels and predictions */

/* Read class names: the ImageNet synset format "n01440764 tench, Tinca tinca"
 * (the leading wnid is dropped, the first name is kept whole: "tench, Tinca tinca")
 * or one plain name per line. Exactly n_classes non-empty lines are expected
 * (fewer or more is VIT_ERR_FORMAT naming the counts). labels: [n_classes]
 * strings, owned; free with free(). */
VitStatus vit_labels_load(char (**labels)[VIT_LABEL_BYTES], const char *path, int n_classes,
                          VitError *err);

/* Indices of the k largest probabilities, descending. idx: [k]. k <= C. */
void vit_top_k(int *idx, const float *probs, int n_classes, int k);

#ifdef __cplusplus
}
#endif
#endif /* VIT_IMAGE_H */
