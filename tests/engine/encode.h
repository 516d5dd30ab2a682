/* encode.h - small JPEG, WebP, TIFF and HEIF/AVIF files made in memory with Debian's
 * encoders (libjpeg-turbo, libwebp, libtiff, libheif), for the malformed-input catalogue
 * and the fuzz seeds. Each returns a malloc'd file of *n bytes, or NULL on error. */
#ifndef VIT_TEST_ENCODE_H
#define VIT_TEST_ENCODE_H

#include <stddef.h>
#include <stdint.h>

/* px [h, w, comp], comp 1 (grey), 3 (RGB) or 4 (CMYK, Adobe-inverted as Pillow writes
 * it). progressive: a progressive scan script. orientation 1..8: an EXIF APP1 segment
 * holding that tag (0: none). */
uint8_t *enc_jpeg(size_t *n, const uint8_t *px, int w, int h, int comp, int quality,
                  int progressive, int orientation);

/* rgb [h, w, 3] or rgba [h, w, 4] (comp); lossless, or lossy at quality 80. */
uint8_t *enc_webp(size_t *n, const uint8_t *px, int w, int h, int comp, int lossless);

/* px [h, w, comp], comp 1 (grey), 3 (RGB) or 4 (RGB + unassociated alpha), 8 bits, one
 * strip per 8 rows; planar: each channel in strips of its own (PlanarConfiguration 2);
 * compression a libtiff COMPRESSION_* (1 none, 5 LZW, 8 deflate); orientation the
 * Orientation tag (0: none). */
uint8_t *enc_tiff(size_t *n, const uint8_t *px, int w, int h, int comp, int planar, int compression,
                  int orientation);

/* rgb [h, w, 3] as HEIC (libheif's x265 encoder) or AVIF (avif 1: its AOM encoder);
 * orientation 1..8 written as the irot/imir boxes (libheif's image_orientation), and
 * as an EXIF block with that tag when exif_too. NULL also when libheif has no encoder
 * for the format, and for HEIC when VITLENS_TEST_NO_HEVC_ENCODER is set (tests/memcheck:
 * x265's SIMD code trips valgrind). */
uint8_t *enc_heif(size_t *n, const uint8_t *rgb, int w, int h, int avif, int orientation,
                  int exif_too);

/* An EXIF block (TIFF header onward, little-endian) with IFD 0 holding the orientation
 * tag alone; *n bytes, static. */
const uint8_t *exif_tiff_block(size_t *n, int orientation);

#endif
