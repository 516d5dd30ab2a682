// spm.cc - the C shim over Debian's libsentencepiece (spm.h). C++ because the library
// is; no exception crosses into C. The model is loaded from its serialized bytes: to
// disable the dummy prefix the bytes get one more ModelProto field appended,
//   normalizer_spec (field 3, length-delimited) { add_dummy_prefix (field 3, varint) = 0 }
// which protobuf merges into the message read before it (a repeated embedded message field
// merges, a repeated scalar field's last value wins: protobuf's encoding guide, "Last One
// Wins"), the same as Hugging Face's model.normalizer_spec.MergeFrom(spec) in
// SiglipTokenizer.get_spm_processor (transformers tokenization_siglip.py).
#include "text/spm.h"

#include <sentencepiece_processor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

struct SpmModel {
    sentencepiece::SentencePieceProcessor sp;
};

static void set_msg(char *msg, size_t n, const char *what, const std::string &s) {
    if (msg && n) std::snprintf(msg, n, "%s%s", what, s.c_str());
}

extern "C" SpmModel *spm_load(const char *bytes, size_t n, int no_dummy_prefix, char *msg,
                              size_t msg_n) {
    try {
        std::string proto(bytes, n);
        if (no_dummy_prefix) {
            static const char merge[] = {0x1a, 0x02, 0x18, 0x00};
            proto.append(merge, sizeof merge);
        }
        SpmModel *m = new SpmModel;
        auto st = m->sp.LoadFromSerializedProto(proto);
        if (!st.ok()) {
            set_msg(msg, msg_n, "", st.ToString());
            delete m;
            return nullptr;
        }
        return m;
    } catch (const std::exception &e) {
        set_msg(msg, msg_n, "sentencepiece: ", e.what());
        return nullptr;
    }
}

extern "C" void spm_free(SpmModel *m) {
    delete m;
}

extern "C" int spm_encode(const SpmModel *m, const char *text, size_t len, char **out,
                          int *n_pieces, char *msg, size_t msg_n) {
    *out = nullptr;
    *n_pieces = 0;
    try {
        std::vector<std::string> pieces;
        auto st = m->sp.Encode(std::string(text, len), &pieces);
        if (!st.ok()) {
            set_msg(msg, msg_n, "", st.ToString());
            return -1;
        }
        size_t total = 0;
        for (const auto &p : pieces) total += p.size() + 1;
        if (pieces.empty()) return 0;
        char *buf = static_cast<char *>(std::malloc(total));
        if (!buf) {
            set_msg(msg, msg_n, "", "out of memory");
            return -1;
        }
        char *w = buf;
        for (const auto &p : pieces) {
            std::memcpy(w, p.data(), p.size());
            w += p.size();
            *w++ = 0;
        }
        *out = buf;
        *n_pieces = static_cast<int>(pieces.size());
        return 0;
    } catch (const std::exception &e) {
        set_msg(msg, msg_n, "sentencepiece: ", e.what());
        return -1;
    }
}

extern "C" int spm_encode_ids(const SpmModel *m, const char *text, size_t len, int **out,
                              int *n_ids, char *msg, size_t msg_n) {
    *out = nullptr;
    *n_ids = 0;
    try {
        std::vector<int> ids;
        auto st = m->sp.Encode(std::string(text, len), &ids);
        if (!st.ok()) {
            set_msg(msg, msg_n, "", st.ToString());
            return -1;
        }
        if (ids.empty()) return 0;
        int *buf = static_cast<int *>(std::malloc(ids.size() * sizeof *buf));
        if (!buf) {
            set_msg(msg, msg_n, "", "out of memory");
            return -1;
        }
        std::memcpy(buf, ids.data(), ids.size() * sizeof *buf);
        *out = buf;
        *n_ids = static_cast<int>(ids.size());
        return 0;
    } catch (const std::exception &e) {
        set_msg(msg, msg_n, "sentencepiece: ", e.what());
        return -1;
    }
}

extern "C" int spm_piece_id(const SpmModel *m, const char *piece) {
    return m->sp.PieceToId(piece);
}

extern "C" int spm_size(const SpmModel *m) {
    return m->sp.GetPieceSize();
}

extern "C" const char *spm_id_to_piece(const SpmModel *m, int id) {
    if (id < 0 || id >= m->sp.GetPieceSize()) return "";
    return m->sp.IdToPiece(id).c_str();
}

extern "C" int spm_is_byte(const SpmModel *m, int id) {
    return id >= 0 && id < m->sp.GetPieceSize() && m->sp.IsByte(id);
}

extern "C" int spm_eos_id(const SpmModel *m) {
    return m->sp.eos_id();
}

extern "C" int spm_pad_id(const SpmModel *m) {
    return m->sp.pad_id();
}
