/* test_map_kinds.c - the table of map kinds (app/view/mapkind.h) and what reads it.
 *
 *   test_map_kinds MODEL.safetensors IMAGE
 *
 * Every row: names, a file tag, its key (none for the first row, no clash with
 * another key), its functions; the key list that --help and the help overlay
 * both show (keys_list) holds E's line naming every kind in the table's order and
 * each kind's own key line, and --help prints exactly that list; on a real
 * forward pass every kind's map has the size map_kind_size gives, its per-layer
 * maps equal its single maps, its prefix share completes its rows to 1, and S's
 * file name carries its tag. A kind the model does not fit (a class-specific one without a
 * head, the probe without an attention-pooling head) is refused with a message; the probe's
 * maps of a SigLIP model (a file made by tests/gui/siglip_model.py) are VitRun.probe_att's
 * rows and their fusions. Exits 0, or 1 naming each failed check. */
#include "view/maps.h"
#include "config/keys.h"
#include "config/options.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what, const char *kind) {
    printf("%s %s%s%s\n", ok ? "ok  " : "FAIL", kind ? kind : "", kind ? ": " : "", what);
    failures += !ok;
}

/* Is word one of the keys of label ("N / Shift+N, P" has N, Shift+N and P)? */
static int label_has_key(const char *label, const char *word) {
    char buf[128];
    snprintf(buf, sizeof buf, "%s", label);
    for (char *t = strtok(buf, " /,"); t; t = strtok(NULL, " /,"))
        if (!strcmp(t, word)) return 1;
    return 0;
}

/* --- the table, the key list and --help ------------------------------------ */

static void table_checks(void) {
    for (int k = 0; k < MAP_KIND_COUNT; k++) {
        const MapKindInfo *m = &MAP_KINDS[k];
        check(m->name && m->title && m->tag && m->map, "name, title, tag and map function",
              m->name);
        if (!m->tag) continue;
        int tag_ok = m->tag[0] != '\0';
        for (const char *c = m->tag; *c; c++)
            tag_ok &= (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-';
        check(tag_ok, "file tag of [a-z0-9-]", m->name);
        for (int j = 0; j < k; j++)
            check(strcmp(m->tag, MAP_KINDS[j].tag) && strcmp(m->name, MAP_KINDS[j].name),
                  "name and tag unlike the rows above", m->name);
        check(!m->layer_maps || m->per_head, "per-layer maps only with per-head maps", m->name);
        check(!m->export_heads || m->per_head, "export_heads only with per-head maps", m->name);
        if (m->key) {
            char up[16];
            snprintf(up, sizeof up, "%s%c", m->shift ? "Shift+" : "",
                     toupper((unsigned char)m->key));
            check(islower((unsigned char)m->key) && m->key_name && !strcmp(m->key_name, up) &&
                      m->help && m->help[0],
                  "its key: lower case, key_name its capital (Shift+ with shift), a help line",
                  m->name);
            for (int j = 0; j < k; j++)
                check(!(MAP_KINDS[j].key == m->key && MAP_KINDS[j].shift == m->shift),
                      "its key and shift unlike the rows above", m->name);
        }
        check(!m->backward || m->uses_target, "a backward-pass kind explains a class", m->name);
        check(!m->backward || m->group == MAP_GROUP_CLASS, "a backward-pass kind is class-specific",
              m->name);
        check(!m->shift_joint || (m->key && !m->shift && m->worker == 2),
              "Shift+key over the slideshow: a kind with its own unshifted key, a worker map with "
              "joint",
              m->name);
        for (int j = 0; j < MAP_KIND_COUNT && m->shift_joint; j++)
            check(!(MAP_KINDS[j].key == m->key && MAP_KINDS[j].shift),
                  "Shift+key not another kind's", m->name);
        check(!m->outline || m->list, "a kind that outlines its list's tokens has a list", m->name);
        check(!m->worker || m->worker == 2 || m->compute, "a worker kind has its compute", m->name);
        check(!m->tokens || (m->prefix && !m->pixels && !m->rgb),
              "a kind with a row over the tokens has a prefix share and a patch map", m->name);
    }
    check(MAP_KINDS[0].key == 0, "the first row, where a kind's key toggles back to, has no key",
          MAP_KINDS[0].name);
    for (int e = 0; e < VIT_EXPLAIN_COUNT; e++) { /* the rows carry the engine's methods */
        int rows = 0;
        for (int k = 0; k < MAP_KIND_COUNT; k++)
            rows += MAP_KINDS[k].backward && (int)MAP_KINDS[k].explain == e;
        check(rows == 1, "each vit_explain method is the map of one class-specific row",
              vit_explain_name((VitExplain)e));
    }

    KeyList keys;
    keys_list(&keys);
    const char *e_line = NULL;
    for (int i = 0; i < keys.n; i++)
        if (!strcmp(keys.rows[i][0], "E / Shift+E")) e_line = keys.rows[i][1];
    check(e_line != NULL, "the key list has E / Shift+E", NULL);
    const char *at = e_line ? strstr(e_line, "map kind:") : NULL;
    for (int k = 0; at && k < MAP_KIND_COUNT; k++) { /* the kinds without a key of their own */
        if (MAP_KINDS[k].key) continue;              /* (those have their own line, below) */
        at = strstr(at, MAP_KINDS[k].name);
        check(at != NULL, "named in E's help line, in the table's order", MAP_KINDS[k].name);
    }
    for (int k = 0; k < MAP_KIND_COUNT; k++) {
        const MapKindInfo *m = &MAP_KINDS[k];
        if (!m->key) continue;
        int lines = 0, clashes = 0;
        for (int i = 0; i < keys.n; i++) {
            if (!strcmp(keys.rows[i][0], m->key_name) && !strcmp(keys.rows[i][1], m->help))
                lines++;
            else if (label_has_key(keys.rows[i][0], m->key_name) ||
                     label_has_key(keys.rows[i][0], (char[]){m->key, 0}))
                clashes++;
        }
        check(lines == 1, "its key and help line are in the key list once", m->name);
        check(clashes == 0, "its key is no other key's", m->name);
    }

    /* --help prints the key list, row for row */
    FILE *f = tmpfile();
    if (!f) {
        check(0, "tmpfile for --help", NULL);
        return;
    }
    options_usage(f);
    long n = ftell(f);
    char *usage = calloc((size_t)n + 1, 1);
    rewind(f);
    if (usage && fread(usage, 1, (size_t)n, f) == (size_t)n) {
        char *keys_at = strstr(usage, "\nkeys:\n"), line[512];
        int in_order = keys_at != NULL;
        const char *p = keys_at ? keys_at + 7 : usage;
        for (int i = 0; in_order && i < keys.n; i++) {
            snprintf(line, sizeof line, "  %-14s  %s\n", keys.rows[i][0], keys.rows[i][1]);
            in_order = !strncmp(p, line, strlen(line));
            p += in_order ? strlen(line) : 0;
        }
        check(in_order && *p == '\n', "--help's keys are the key list, row for row", NULL);
    } else {
        check(0, "read --help back", NULL);
    }
    free(usage);
    fclose(f);
}

/* --- the kinds on a real forward pass -------------------------------------- */

/* The probe kind's maps: head h is VitRun.probe_att's row h (sums to 1), the fusions its
 * mean, max and min over the heads. */
static void probe_checks(const Scene *sc, const View *v0, const char *name) {
    const VitConfig *c = &sc->run.cfg;
    int H = c->n_heads, N = c->n_patches, ok = sc->run.probe_att != NULL;
    float *m = malloc((size_t)N * sizeof *m);
    VitError err;
    for (int i = 0; ok && m && i < H + VIEW_N_FUSIONS; i++) {
        View v = *v0;
        v.head = i;
        if (view_map(m, sc, &v, &err)) {
            ok = 0;
            break;
        }
        double sum = 0.0;
        for (int p = 0; p < N; p++) {
            const float *a = sc->run.probe_att + p;
            float want = a[0], mean = 0.0f;
            if (i < H) want = a[(size_t)i * N];
            for (int h = 0; i >= H && h < H; h++) {
                float x = a[(size_t)h * N];
                mean += x / (float)H;
                if (i == H + VIT_FUSE_MAX ? x > want : x < want) want = x;
            }
            if (i == H + VIT_FUSE_MEAN) want = mean;
            ok &= fabsf(m[p] - want) <= 1e-6f;
            sum += m[p];
        }
        if (i < H) ok &= fabs(sum - 1.0) < 1e-4;
    }
    check(ok && m, "the probe's per-head attention and its fusions (VitRun.probe_att)", name);
    free(m);
}

static void scene_checks(const char *model_path, const char *image) {
    Model m;
    Scene sc = {0};
    VitError err;
    if (model_load(&m, model_path, NULL, NULL, 1, &err) || scene_run(&sc, &m.vit, image, &err)) {
        check(0, err.msg, "load and run");
        return;
    }
    const VitConfig *c = &sc.run.cfg;
    int K = c->n_heads + VIEW_N_FUSIONS, N_max = (int)map_kind_max_floats(c, 0);
    float *map = malloc((size_t)N_max * sizeof *map);
    float *over = malloc((size_t)K * N_max * sizeof *over);
    float share[VIT_MAX_PREFIX];
    for (int k = 0; map && over && k < MAP_KIND_COUNT; k++) {
        const MapKindInfo *mk = &MAP_KINDS[k];
        int w, h;
        map_kind_size(&w, &h, k, c);
        check(mk->pixels ? w == c->image_w && h == c->image_h : w == c->grid_w && h == c->grid_h,
              "map_kind_size: [Sh, Sw] for a pixel map, else [gh, gw]", mk->name);
        int ch = map_kind_channels(k);
        check(ch == (mk->rgb ? 4 : 1), "map_kind_channels: 4 for colours, else 1", mk->name);
        check((size_t)w * h * ch <= map_kind_max_floats(c, 0), "fits map_kind_max_floats",
              mk->name);
        View v = {.kind = k,
                  .layer = c->n_layers / 2,
                  .head = c->n_heads + VIT_FUSE_MEAN,
                  .discard_ratio = 0.3f,
                  .query = c->n_prefix + 1,
                  .target = VIEW_TOP1};
        if (!map_kind_usable(k, c)) { /* refused, with the reason */
            VitStatus ru = view_map(map, &sc, &v, &err);
            check(ru == VIT_ERR_ARG && strstr(err.msg, map_kind_unusable_why(k, c)),
                  "a kind the model does not fit: refused with why", mk->name);
            continue;
        }
        if (view_on_worker(&v)) { /* the worker's view_slow_map first */
            check(!view_ready(&sc, &v) && view_map(map, &sc, &v, &err) == VIT_ERR_ARG,
                  "a worker map before view_slow_map: refused", mk->name);
            VitStatus rs = view_slow_map(&sc, &v, NULL, &err);
            check(rs == VIT_OK, rs ? err.msg : "view_slow_map", mk->name);
            scene_slow_swap(&sc);
            check(view_ready(&sc, &v), "ready after view_slow_map", mk->name);
            View u = v;
            u.layer = v.layer - 1;
            check(!view_ready(&sc, &u), "not ready for another layer", mk->name);
        }
        if (mk->backward && !view_ready(&sc, &v)) { /* the worker's scene_explain first */
            check(view_map(map, &sc, &v, &err) == VIT_ERR_ARG,
                  "a class-specific map before scene_explain: refused", mk->name);
            VitStatus rx = scene_explain(&sc, view_class(&v, &sc), v.discard_ratio, mk->lrp, &err);
            check(rx == VIT_OK, rx ? err.msg : "scene_explain", mk->name);
            scene_explain_swap(&sc);
            check(view_ready(&sc, &v), "ready after scene_explain", mk->name);
        }
        VitStatus rc = view_map(map, &sc, &v, &err);
        check(rc == VIT_OK, rc ? err.msg : "view_map", mk->name);
        if (rc) continue;
        if (mk->needs_probe) probe_checks(&sc, &v, mk->name);
        if (mk->rgb) { /* colours in [0, 1], A 0 or 1, some foreground and some background */
            int ok = 1, fg = 0;
            for (int i = 0; i < w * h * 4; i++) ok &= map[i] >= 0.0f && map[i] <= 1.0f;
            for (int i = 0; i < w * h; i++) {
                ok &= map[i * 4 + 3] == 0.0f || map[i * 4 + 3] == 1.0f;
                fg += map[i * 4 + 3] == 1.0f;
            }
            check(ok && fg > 0 && fg < w * h, "colours in [0, 1], a foreground and a background",
                  mk->name);
        }
        if (mk->prefix) {
            double sum = 0;
            rc = view_prefix(share, &sc, &v, &err);
            for (int i = 0; i < c->n_prefix; i++) sum += share[i];
            for (int i = 0; i < w * h; i++) sum += map[i];
            check(rc == VIT_OK && fabs(sum - 1.0) < 1e-4, "map + prefix share sum to 1", mk->name);
        } else {
            check(view_prefix(share, &sc, &v, &err) == VIT_ERR_ARG, "no prefix: refused", mk->name);
        }
        if (mk->per_head) { /* each overview map is its single map, normalised */
            rc = overview_maps(over, NULL, NULL, &sc, &v, 0, 0, &err);
            float worst = rc ? 1.0f : 0.0f;
            for (int i = 0; rc == VIT_OK && i < K; i++) {
                View u = v;
                u.head = i;
                if (view_map(map, &sc, &u, &err)) worst = 1.0f;
                map_normalize(map, map, w * h, NULL, NULL);
                for (int p = 0; p < w * h; p++)
                    worst = fmaxf(worst, fabsf(map[p] - over[(size_t)i * w * h + p]));
            }
            check(worst < 1e-6f, "its per-layer maps are its single maps", mk->name);
        } else {
            check(overview_maps(over, NULL, NULL, &sc, &v, 0, 0, &err) == VIT_ERR_ARG,
                  "no per-head maps: the overview is refused", mk->name);
        }
        /* view_compute, the window's (GUI or worker thread): the same map and prefix
         * share, the layer's range with U, the table of the overviews; cancelled, it
         * says so */
        ViewMaps vm = {.view = v,
                       .overview = mk->per_head ? VIEW_TABLE : VIEW_SINGLE,
                       .shared = 1,
                       .map = malloc((size_t)N_max * sizeof(float)),
                       .norm = malloc((size_t)N_max * sizeof(float)),
                       .atlas = malloc((size_t)c->n_layers * K * N_max * sizeof(float))};
        if (vm.map && vm.norm && vm.atlas && !view_map(map, &sc, &v, &err)) {
            float lo = 0, hi = 0;
            if (mk->per_head) view_layer_range(&lo, &hi, &sc, &v, &err);
            rc = view_compute(&vm, &sc, &err);
            check(rc == VIT_OK && !memcmp(vm.map, map, (size_t)w * h * ch * sizeof *map) &&
                      vm.w == w && vm.h == h && vm.n_prefix == (mk->prefix ? c->n_prefix : 0) &&
                      (!mk->prefix ||
                       !memcmp(vm.prefix, share, (size_t)c->n_prefix * sizeof *share)) &&
                      (!mk->per_head || (vm.lo == lo && vm.hi == hi)) &&
                      vm.n_atlas == (mk->per_head ? c->n_layers * K : 0),
                  rc ? err.msg : "view_compute: the view's map, prefix share, range, table",
                  mk->name);
            VitControl ctl = {0};
            vit_control_cancel(&ctl);
            Scene stopped = scene_with_control(&sc, &ctl);
            check(view_compute(&vm, &stopped, &err) == VIT_ERR_CANCELLED,
                  "view_compute with a cancelled control: VIT_ERR_CANCELLED", mk->name);
        }
        free(vm.map), free(vm.norm), free(vm.atlas);
        char name[512], tag[64];
        view_file_name(name, sizeof name, "photo.png", "model", &v, c, NULL, NULL);
        snprintf(tag, sizeof tag, "_%s", mk->tag);
        check(strstr(name, tag) != NULL, name, mk->name);
    }
    free(map), free(over);
    scene_free(&sc);
    model_free(&m);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: test_map_kinds MODEL.safetensors IMAGE\n");
        return 2;
    }
    table_checks();
    scene_checks(argv[1], argv[2]);
    printf("map kinds: %s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
