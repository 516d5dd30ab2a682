/* fuzzlib.c - see fuzzlib.h. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzzlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void memfile_init(MemFile *f, const char *name) {
    f->fd = memfd_create(name, 0);
    if (f->fd < 0) {
        perror("memfd_create");
        abort();
    }
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

void memfile_set(MemFile *f, const uint8_t *data, size_t n) {
    if (ftruncate(f->fd, 0) != 0) {
        perror("ftruncate");
        abort();
    }
    for (size_t at = 0; at < n;) {
        ssize_t k = pwrite(f->fd, data + at, n - at, (off_t)at);
        if (k <= 0) {
            perror("pwrite");
            abort();
        }
        at += (size_t)k;
    }
}

void fuzz_check_error(VitStatus rc, const VitError *err, const char *what) {
    if (rc == VIT_OK) return;
    if (err->code != rc || memchr(err->msg, 0, sizeof err->msg) == NULL || err->msg[0] == 0) {
        fprintf(stderr, "%s: status %d but err.code %d, message \"%.*s\"\n", what, rc, err->code,
                (int)sizeof err->msg, err->msg);
        abort();
    }
}
