/* pth.c - PyTorch checkpoints (engine/load/): torch.save's zip format (PyTorch >= 1.6, also
 * Hugging Face's pytorch_model.bin) read into the same tensor table as a .safetensors file
 * (StFile, internal.h), without running any of it.
 *
 * The format (torch/serialization.py, _save): a zip whose entries sit under one folder,
 * <prefix>/data.pkl (the object, pickled with protocol 2) and <prefix>/data/<key> (one
 * storage each, raw little-endian elements), <prefix>/version, and from torch 2.x
 * <prefix>/byteorder. A tensor in data.pkl is
 *   torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
 *                                   backward_hooks[, metadata])
 * where `storage` is a persistent id ('storage', torch.FloatStorage, key, location, numel),
 * an nn.Parameter is torch._utils._rebuild_parameter(tensor, requires_grad, hooks), and a
 * state dict is collections.OrderedDict() filled by SETITEMS (its _metadata set by BUILD).
 *
 * Python's pickle runs whatever a file names (GLOBAL os system, REDUCE: os.system(...)).
 * This is not Python's unpickler: it knows the opcodes torch.save writes and a closed list
 * of globals, and builds plain values (dicts, lists, tuples, numbers, strings, storages,
 * tensors; an argparse.Namespace of a training script's args as an opaque value whose
 * fields are dropped); any other global is refused when it is read, before anything could
 * use it, with a message naming the file and the global. Nothing in a checkpoint is ever
 * called.
 *
 * Every size comes from the file and is checked before use, and a hostile file is refused
 * in time linear in its size and memory bounded by it (issue 34):
 *   - data.pkl: at most PKL_MAX_BYTES, and a compressed one at most PTH_MAX_INFLATE_RATIO
 *     times its compressed size plus PKL_INFLATE_SLACK (torch.save stores it; ViT-L's deflates
 *     4x), checked before it is inflated.
 *   - what the unpickler keeps (values, 40 bytes each, made in blocks; strings, which are
 *     copies of the pickle's bytes; the item arrays of tuples, lists and dicts, whose items
 *     a memo'd value can repeat at 2 bytes each; tensors' shapes) is counted as it is made,
 *     malloc's overhead included: at most PKL_MEM_PER_BYTE bytes per byte of the file plus
 *     PKL_MEM_SLACK, and never PKL_MAX_MEM. ViT-L's state dict (31 KB of pickle) needs
 *     0.2 MB, a checkpoint with AdamW's state beside it (100 KB) 0.6 MB (6 bytes per byte);
 *     a 1 MB file gets at most 48 MB, any file 128 MiB. None, True and False are
 *     constants, not values made. The stack and the memo have limits of their own (8 MB
 *     each).
 *   - the search for the state dict under its wrappers visits each dict once (a dict may
 *     hold itself, or many keys one child); storages are found by key in a hash table.
 *   - each storage's entry must hold exactly the bytes the pickle says (torch.save writes
 *     numel * element size, no more: a longer entry is refused too), must not inflate to
 *     more than PTH_MAX_INFLATE_RATIO times its compressed size plus PTH_INFLATE_SLACK, nor
 *     all of them together to more than that of their summed compressed sizes (a zip bomb,
 *     or a file padded with other entries, is refused before anything is allocated); only
 *     the storages a tensor of the state dict uses are allocated and read.
 *   - every entry read (data.pkl, byteorder, the storages) is read whole and its CRC-32
 *     checked against the zip's directory (a damaged download); an encrypted entry is
 *     refused by name.
 *   - a global's module and name are taken whole: one that is empty, longer than 127
 *     bytes or holds a NUL byte is refused (C's strings would cut it to another name).
 * The storages are read into one buffer the StFile owns.
 *
 * This file reads the zip; the pickle machine is pth_pickle.c (its objects pth_objects.c),
 * the state dict pth_dict.c, their shared types pth.h. */
#include "pth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>
#include <zlib.h>

/* --- the zip ------------------------------------------------------------------------- */

static VitStatus zip_error(VitError *err, const char *fname, const char *what, zip_error_t *ze) {
    return vit_set_error(err, VIT_ERR_FORMAT, "%s: %s: %s (a truncated or damaged zip?)", fname,
                         what, zip_error_strerror(ze));
}

/* Entry `name`: its index and stat (sizes, CRC-32), or an error naming it: missing, or
 * encrypted (torch.save never encrypts; libzip would need a password, and without one a
 * read fails as if the entry were damaged). */
static VitStatus stat_entry(zip_t *za, const char *name, zip_uint64_t *idx, zip_stat_t *zs,
                            const char *fname, const char *what, VitError *err) {
    const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_CRC;
    zip_int64_t i = zip_name_locate(za, name, 0);
    if (i < 0 || zip_stat_index(za, (zip_uint64_t)i, 0, zs) != 0 || (zs->valid & need) != need)
        return vit_set_error(err, VIT_ERR_FORMAT, "%s: %s: entry '%s' is missing from the zip",
                             fname, what, name);
    if ((zs->valid & ZIP_STAT_ENCRYPTION_METHOD) && zs->encryption_method != ZIP_EM_NONE)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: entry '%s' is encrypted: vitlens reads plain torch.save zips",
                             fname, name);
    *idx = (zip_uint64_t)i;
    return VIT_OK;
}

/* Does a compressed entry of `size` bytes inflate from `comp` bytes by more than
 * PTH_MAX_INFLATE_RATIO, beyond `slack`? */
static int inflates_too_much(uint64_t size, uint64_t comp, uint64_t slack) {
    return size / PTH_MAX_INFLATE_RATIO > comp + slack / PTH_MAX_INFLATE_RATIO;
}

/* Entry idx (`name`, stat_entry'd by the caller, who checked that it holds `size` bytes)
 * whole into buf [size], its CRC-32 checked against the zip's directory: libzip checks it
 * only when a read asks past the entry's end, which a read of its size never does. A
 * stored entry is read raw (ZIP_FL_COMPRESSED: its bytes as they are, without libzip's
 * own pass over them), so that its CRC is computed once. */
static VitStatus read_entry(zip_t *za, zip_uint64_t idx, const char *name, uint8_t *buf,
                            size_t size, const char *fname, const char *what, VitError *err) {
    zip_stat_t zs;
    if (zip_stat_index(za, idx, 0, &zs) != 0) return zip_error(err, fname, name, zip_get_error(za));
    int raw = (zs.valid & ZIP_STAT_COMP_METHOD) && zs.comp_method == ZIP_CM_STORE;
    zip_file_t *zf = zip_fopen_index(za, idx, raw ? ZIP_FL_COMPRESSED : 0);
    if (!zf) return zip_error(err, fname, name, zip_get_error(za));
    size_t got = 0;
    while (got < size) {
        zip_int64_t r = zip_fread(zf, buf + got, size - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    VitStatus rc = VIT_OK;
    uint32_t crc = got == size ? (uint32_t)crc32_z(crc32(0, Z_NULL, 0), buf, size) : 0;
    if (got < size)
        rc =
            vit_set_error(err, VIT_ERR_FORMAT,
                          "%s: %s: entry '%s' ends after %zu of %zu bytes (%s): truncated or "
                          "damaged",
                          fname, what, name, got, size, zip_error_strerror(zip_file_get_error(zf)));
    else if (crc != zs.crc)
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: entry '%s': CRC-32 mismatch (stored 0x%08x, computed 0x%08x): the "
                           "download is damaged",
                           fname, name, (unsigned)zs.crc, (unsigned)crc);
    zip_fclose(zf);
    return rc;
}

VitStatus pth_check_pickle(const uint8_t *pkl, size_t n, const char *fname, VitError *err) {
    Pkl p = pkl_new(fname, n, err);
    StFile st = {0};
    Val *root = NULL;
    const char *how = NULL;
    size_t total = 0;
    VitStatus rc = n > PKL_MAX_BYTES ? vit_set_error(err, VIT_ERR_FORMAT, "%s: too long", fname)
                                     : pkl_unpickle(&p, pkl, n, &root);
    const Val *sd = rc ? NULL : pth_find_state_dict(root, &how, 0);
    if (!rc && !sd) rc = vit_set_error(err, VIT_ERR_FORMAT, "%s: no state dict", fname);
    if (!rc) rc = pth_layout_storages(&p, sd, &total);
    if (!rc) rc = pth_table_from_dict(&p, &st, sd);
    st_free(&st);
    pkl_free(&p);
    return rc;
}

int pth_is_zip(const uint8_t *file, size_t n) {
    return n >= 4 && !memcmp(file, "PK\3\4", 4);
}

int pth_is_legacy(const uint8_t *file, size_t n) {
    /* pickle protocol 2, then LONG1 of the legacy magic number 0x1950a86a20f9469cfc6c */
    static const uint8_t magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                    0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    return n >= sizeof magic && !memcmp(file, magic, sizeof magic);
}

/* The zip's <prefix>/data.pkl, the one pickle at depth 1: its folder into prefix [cap];
 * a zip without one, with two, or a TorchScript archive refused. */
static VitStatus find_pickle(zip_t *za, char *prefix, size_t cap, const char *fname,
                             VitError *err) {
    char entry[256];
    zip_int64_t n_entries = zip_get_num_entries(za, 0), pkl_idx = -1;
    for (zip_int64_t e = 0; e < n_entries; e++) {
        const char *nm = zip_get_name(za, (zip_uint64_t)e, ZIP_FL_ENC_RAW);
        const char *slash = nm ? strchr(nm, '/') : NULL;
        if (!slash || strcmp(slash, "/data.pkl") != 0 || (size_t)(slash - nm) >= cap) continue;
        if (pkl_idx >= 0)
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: the zip holds more than one data.pkl: not a torch.save file",
                                 fname);
        pkl_idx = e;
        snprintf(prefix, cap, "%.*s", (int)(slash - nm), nm);
    }
    if (pkl_idx < 0)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: a zip without <folder>/data.pkl: not a PyTorch checkpoint "
                             "(torch.save)",
                             fname);
    snprintf(entry, sizeof entry, "%s/constants.pkl", prefix);
    if (zip_name_locate(za, entry, 0) >= 0)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: a TorchScript archive (torch.jit.save), not a state dict: in "
                             "Python, torch.save(torch.jit.load(path).state_dict(), \"model.pth\")",
                             fname);
    return VIT_OK;
}

/* <prefix>/byteorder, when there is one (torch 2.x): "little", else refused. */
static VitStatus check_byteorder(zip_t *za, const char *prefix, const char *fname, VitError *err) {
    char entry[256];
    zip_uint64_t idx;
    zip_stat_t zs;
    VitStatus rc;
    snprintf(entry, sizeof entry, "%s/byteorder", prefix);
    if (zip_name_locate(za, entry, 0) < 0) return VIT_OK;
    char bo[6];
    if ((rc = stat_entry(za, entry, &idx, &zs, fname, "byteorder", err))) return rc;
    if (zs.size == sizeof bo &&
        (rc = read_entry(za, idx, entry, (uint8_t *)bo, sizeof bo, fname, "byteorder", err)))
        return rc;
    if (zs.size != sizeof bo || memcmp(bo, "little", 6) != 0)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: the storages are not little-endian ('%s' says otherwise)", fname,
                             entry);
    return VIT_OK;
}

/* <prefix>/data.pkl whole into *pkl [*pkl_n] (malloc'd, the caller frees it, also on an
 * error), its size checked against the limit and its compressed size first. */
static VitStatus read_pickle(zip_t *za, const char *prefix, uint8_t **pkl, size_t *pkl_n,
                             const char *fname, VitError *err) {
    char entry[256];
    zip_uint64_t idx;
    zip_stat_t zs;
    VitStatus rc;
    snprintf(entry, sizeof entry, "%s/data.pkl", prefix);
    if ((rc = stat_entry(za, entry, &idx, &zs, fname, "data.pkl", err))) return rc;
    if (zs.size > PKL_MAX_BYTES || zs.size == 0)
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: data.pkl is %llu bytes, expected 1 to %u (the limit)", fname,
                             (unsigned long long)zs.size, PKL_MAX_BYTES);
    if (inflates_too_much(zs.size, zs.comp_size, PKL_INFLATE_SLACK))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: data.pkl inflates to %llu bytes from %llu: more than %dx its "
                             "compressed size (a zip bomb?), refused before inflating",
                             fname, (unsigned long long)zs.size, (unsigned long long)zs.comp_size,
                             PTH_MAX_INFLATE_RATIO);
    *pkl_n = (size_t)zs.size;
    if (!(*pkl = malloc(*pkl_n)))
        return vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory", fname);
    return read_entry(za, idx, entry, *pkl, *pkl_n, fname, "data.pkl", err);
}

/* Each storage used: its entry holds exactly its bytes and is no zip bomb, nor are they all
 * together (whatever else the zip holds), before anything is allocated. Each one's entry
 * index into its Storage. */
static VitStatus check_storages(zip_t *za, Pkl *p, const char *prefix, const char *fname,
                                VitError *err) {
    char entry[256];
    zip_stat_t zs;
    VitStatus rc;
    uint64_t sum_bytes = 0, sum_comp = 0;
    for (int s = 0; s < p->n_storages; s++) {
        Storage *sg = &p->storages[s];
        if (!sg->used) continue;
        uint64_t bytes = (uint64_t)sg->numel * (uint64_t)sg->elem_bytes;
        snprintf(entry, sizeof entry, "%s/data/%s", prefix, sg->key);
        if ((rc = stat_entry(za, entry, &sg->entry, &zs, fname, "storage", err))) return rc;
        if (zs.size != bytes)
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: storage: entry '%s' holds %llu bytes, the pickle says %llu",
                                 fname, entry, (unsigned long long)zs.size,
                                 (unsigned long long)bytes);
        if (inflates_too_much(bytes, zs.comp_size, PTH_INFLATE_SLACK))
            return vit_set_error(err, VIT_ERR_FORMAT,
                                 "%s: entry '%s' inflates to %llu bytes from %llu: more than %dx "
                                 "its compressed size (a zip bomb?), refused before inflating",
                                 fname, entry, (unsigned long long)bytes,
                                 (unsigned long long)zs.comp_size, PTH_MAX_INFLATE_RATIO);
        sum_bytes += bytes;
        sum_comp += zs.comp_size;
    }
    if (inflates_too_much(sum_bytes, sum_comp, PTH_INFLATE_SLACK))
        return vit_set_error(err, VIT_ERR_FORMAT,
                             "%s: the storages inflate to %llu bytes from %llu: more than %dx "
                             "their compressed size (a zip bomb?), refused before inflating",
                             fname, (unsigned long long)sum_bytes, (unsigned long long)sum_comp,
                             PTH_MAX_INFLATE_RATIO);
    return VIT_OK;
}

/* The storages used (check_storages'd) into data, each at its place (layout_storages). */
static VitStatus read_storages(zip_t *za, const Pkl *p, const char *prefix, uint8_t *data,
                               const char *fname, VitError *err) {
    char entry[256];
    VitStatus rc;
    for (int s = 0; s < p->n_storages; s++) {
        const Storage *sg = &p->storages[s];
        size_t bytes = (size_t)sg->numel * (size_t)sg->elem_bytes;
        if (!sg->used) continue;
        snprintf(entry, sizeof entry, "%s/data/%s", prefix, sg->key);
        if ((rc = read_entry(za, sg->entry, entry, data + sg->at, bytes, fname, "storage", err)))
            return rc;
    }
    return VIT_OK;
}

VitStatus pth_parse(StFile *st, const uint8_t *file, size_t file_bytes, const char *fname,
                    VitError *err) {
    memset(st, 0, sizeof *st);
    Pkl p = pkl_new(fname, file_bytes, err);
    zip_error_t ze;
    zip_error_init(&ze);
    zip_t *za = NULL;
    uint8_t *pkl = NULL, *data = NULL;
    size_t pkl_n = 0;
    VitStatus rc = VIT_OK;
    char prefix[128];

    zip_source_t *src = zip_source_buffer_create(file, file_bytes, 0, &ze);
    if (!src || !(za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze))) {
        if (src) zip_source_free(src);
        rc = zip_error(err, fname, "not a readable zip", &ze);
        goto done;
    }
    if ((rc = find_pickle(za, prefix, sizeof prefix, fname, err)) ||
        (rc = check_byteorder(za, prefix, fname, err)) ||
        (rc = read_pickle(za, prefix, &pkl, &pkl_n, fname, err)))
        goto done;

    Val *root = NULL;
    if ((rc = pkl_unpickle(&p, pkl, pkl_n, &root))) goto done;
    const char *how = NULL;
    const Val *sd = pth_find_state_dict(root, &how, 0);
    if (!sd) {
        rc = vit_set_error(err, VIT_ERR_FORMAT,
                           "%s: no state dict in the checkpoint (a dict of tensors, alone or "
                           "under 'model', 'state_dict', 'teacher', ...)",
                           fname);
        goto done;
    }
    size_t total = 0;
    if ((rc = pth_layout_storages(&p, sd, &total)) || (rc = pth_table_from_dict(&p, st, sd)) ||
        (rc = check_storages(za, &p, prefix, fname, err)))
        goto done;
    if (!(data = calloc(total ? total : 1, 1))) {
        rc = vit_set_error(err, VIT_ERR_NOMEM, "%s: out of memory for %zu bytes of weights", fname,
                           total);
        goto done;
    }
    if ((rc = read_storages(za, &p, prefix, data, fname, err))) goto done;
    st->data = data;
    st->data_bytes = total;
    st->owned = data;
    data = NULL;
    pth_strip_prefixes(st);
    for (int i = 0; i < st->n; i++) st->tensors[i].data = st->data + st->tensors[i].begin;

done:
    if (rc) st_free(st);
    free(data);
    free(pkl);
    pkl_free(&p);
    if (za) zip_discard(za);
    zip_error_fini(&ze);
    return rc;
}
