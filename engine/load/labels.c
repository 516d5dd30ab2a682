/* labels.c - class names and top-k predictions. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* "n01440764 tench, Tinca tinca" -> "tench, Tinca tinca"; a plain line is kept. */
static const char *strip_wnid(const char *s) {
    if (s[0] == 'n') {
        int i = 1;
        while (isdigit((unsigned char)s[i])) i++;
        if (i == 9 && (s[i] == ' ' || s[i] == '\t')) {
            s += i;
            while (*s == ' ' || *s == '\t') s++;
        }
    }
    return s;
}

VitStatus vit_labels_load(char (**labels)[VIT_LABEL_BYTES], const char *path, int n_classes,
                          VitError *err) {
    *labels = NULL;
    if (n_classes < 1)
        return vit_set_error(err, VIT_ERR_ARG, "%s: the model has no classification head", path);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return vit_set_error(err, VIT_ERR_IO, "%s: is a directory, not a labels file", path);
    FILE *f = fopen(path, "r");
    if (!f) return vit_set_error(err, VIT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char(*out)[VIT_LABEL_BYTES] = calloc((size_t)n_classes, sizeof *out);
    if (!out) {
        fclose(f);
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", path);
    }
    char line[VIT_MAX_LABEL_LINE];
    int n = 0, lineno = 0;
    VitStatus rc = VIT_OK;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = vit_set_error(err, VIT_ERR_FORMAT, "%s:%d: line longer than %zu bytes", path,
                               lineno, sizeof line - 2);
            goto fail;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' '))
            line[--len] = 0;
        const char *name = strip_wnid(line);
        if (!*name) continue; /* blank lines (e.g. a trailing newline) are not classes */
        /* a longer name is cut to VIT_LABEL_BYTES - 1 bytes; terminal codes escaped */
        if (n < n_classes) vit_escape(out[n], VIT_LABEL_BYTES, name);
        n++;
    }
    if (ferror(f)) {
        rc = vit_set_error(err, VIT_ERR_IO, "%s: read error", path);
        goto fail;
    }
    if (n != n_classes) {
        rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: %d labels, but the model has %d classes", path,
                           n, n_classes);
        goto fail;
    }
    fclose(f);
    *labels = out;
    return VIT_OK;
fail:
    fclose(f);
    free(out);
    return rc;
}

void vit_top_k(int *idx, const float *probs, int n_classes, int k) {
    if (k > n_classes) k = n_classes;
    for (int j = 0; j < k; j++) idx[j] = -1;
    for (int c = 0; c < n_classes; c++) {
        /* insertion into the sorted top-k; ties keep the lower index first */
        int j = k;
        while (j > 0 && (idx[j - 1] < 0 || probs[c] > probs[idx[j - 1]])) j--;
        if (j >= k) continue;
        for (int m = k - 1; m > j; m--) idx[m] = idx[m - 1];
        idx[j] = c;
    }
}
