/* contrast.c - --contrast A,B's two classes from the command line's words (view/scene.h,
 * scene_score_parse_contrast): each as --class takes it, a comma inside a class name tried as
 * the split too. */
#include "view/scene.h"

#include <stdio.h>
#include <string.h>

/* --contrast A,B: the two classes a, b, each as --class takes it; see
 * scene_score_parse_contrast. 0, or -1 with the message in msg. */
static int contrast_classes(const Model *m, const char *arg, int *a, int *b, char *msg, size_t n) {
    char left[512], why[600] = "";
    int found = 0;
    for (const char *comma = strchr(arg, ','); comma; comma = strchr(comma + 1, ',')) {
        size_t len = (size_t)(comma - arg);
        if (len >= sizeof left) break;
        const char *r = comma + 1;
        while (len && arg[len - 1] == ' ') len--;
        while (*r == ' ') r++;
        memcpy(left, arg, len), left[len] = '\0';
        int x, y;
        if (model_find_class(m, "--contrast", left, &x, why, sizeof why) ||
            model_find_class(m, "--contrast", r, &y, why, sizeof why))
            continue;
        if (found && (x != *a || y != *b)) {
            snprintf(msg, n,
                     "--contrast %.200s: names two classes more than one way (%d,%d or %d,%d): "
                     "give their indices",
                     arg, *a, *b, x, y);
            return -1;
        }
        *a = x, *b = y, found = 1;
    }
    if (!found) {
        snprintf(msg, n, "%s",
                 why[0] && strchr(arg, ',') == strrchr(arg, ',')
                     ? why
                     : "--contrast: expected A,B, two classes as --class takes them (\"282,281\")");
        if (why[0] && strchr(arg, ',') != strrchr(arg, ','))
            snprintf(msg, n, "--contrast %.200s: no comma splits it into two classes of %s", arg,
                     m->name);
        return -1;
    }
    if (*a == *b) {
        snprintf(msg, n,
                 "--contrast %.200s: A and B are the same class (%d): logit A - logit B is 0", arg,
                 *a);
        return -1;
    }
    return 0;
}

int scene_score_parse_contrast(SceneScore *s, const Model *m, const char *arg, char *msg,
                               size_t n) {
    int a = -1, b = -1;
    if (contrast_classes(m, arg, &a, &b, msg, n)) return -1;
    scene_score_contrast(s, m, a, b);
    return 0;
}
