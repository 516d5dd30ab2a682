/* spm.h - a C view of Debian's libsentencepiece (C++), for the SigLIP and SigLIP 2 (Gemma)
 * tokenizers (engine/text/spiece.c). engine/text/spm.cc is the only C++ in the engine: it loads a
 * SentencePiece model from its bytes and encodes text into pieces; everything Hugging Face's
 * tokenizer does around the library is C, in spiece.c. */
#ifndef VIT_SPM_H
#define VIT_SPM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct SpmModel SpmModel;

/* Load a SentencePiece ModelProto from bytes [n] (the file's; copied), with
 * normalizer_spec.add_dummy_prefix set to false when no_dummy_prefix (Hugging Face's
 * SiglipTokenizer.get_spm_processor does the same, through a protobuf MergeFrom). NULL
 * with the library's message in msg [msg_n] when it cannot. Free with spm_free. */
SpmModel *spm_load(const char *bytes, size_t n, int no_dummy_prefix, char *msg, size_t msg_n);
void spm_free(SpmModel *m); /* NULL-safe */

/* text [len] (UTF-8) -> its pieces (sp_model.encode(text, out_type=str)): *out a malloc'd
 * buffer of *n_pieces NUL-terminated strings one after another (free()), NULL when there
 * are none. 0, or -1 (the message in msg) when the library fails or memory runs out. */
int spm_encode(const SpmModel *m, const char *text, size_t len, char **out, int *n_pieces,
               char *msg, size_t msg_n);

/* text [len] (UTF-8) -> its ids (sp_model.EncodeAsIds(text), what big_vision's
 * SentencepieceTokenizer.to_int calls): *out a malloc'd [*n_ids] (free()), NULL when there
 * are none. 0, or -1 (the message in msg) when the library fails or memory runs out. */
int spm_encode_ids(const SpmModel *m, const char *text, size_t len, int **out, int *n_ids,
                   char *msg, size_t msg_n);

int spm_piece_id(const SpmModel *m, const char *piece); /* PieceToId: the unknown id if none */
int spm_size(const SpmModel *m);                        /* the vocabulary's size */
/* id -> its piece's text (IdToPiece), valid while m lives; "" for an id out of range */
const char *spm_id_to_piece(const SpmModel *m, int id);
int spm_is_byte(const SpmModel *m, int id); /* 1: a byte-fallback piece "<0xNN>" (IsByte) */
int spm_eos_id(const SpmModel *m);          /* trainer_spec.eos_id (eos_id()): -1 when none */
int spm_pad_id(const SpmModel *m);          /* trainer_spec.pad_id (pad_id()): -1 when none */

#ifdef __cplusplus
}
#endif
#endif /* VIT_SPM_H */
