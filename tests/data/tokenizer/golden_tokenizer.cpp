// Golden maker for boltrt's tokenizer parity tests. NOT built by CMake; it links llama.cpp
// (the reference build in ~/.cache/llama-ref) and is run by hand. Build and run: see README.md.
//
//   golden_tokenizer VOCAB.gguf CORPUS.bin > NAME.golden
//
// Output (text, one record per line; ids hashed with FNV-1a 64 over their uint32 LE bytes):
//   H corpus_strings corpus_fnv64
//   V n_vocab bos eos eot add_bos add_eos
//   A first count attr          run-length llama_vocab_get_attr over all ids
//   E id ...                    ids with llama_vocab_is_eog
//   P fnv64(pieces special=1) fnv64(pieces special=0)   token_to_piece of every id, concatenated
//                                                       with a 0xFF separator
//   S index m0 m1 m2 m3         per corpus string, modes (add_special,parse_special) =
//                               (0,0) (0,1) (1,0) (1,1); each "count:hash" or
//                               "count:hash:id,id,..." for <= 8 tokens, "X" when llama.cpp
//                               threw, "=" for the previous mode's ids, "^" for BOS + the ids
//                               of mode-2
//   D index len:hash len:hash   llama_detokenize of mode (1,1)'s ids with
//                               (remove_special,unparse_special) = (0,0) and (1,1); every 4th
//                               string
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "llama.h"

static uint64_t fnv64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static uint64_t hash_ids(const std::vector<llama_token>& ids) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (llama_token t : ids) {
    const uint32_t u = static_cast<uint32_t>(t);
    const unsigned char b[4] = {static_cast<unsigned char>(u), static_cast<unsigned char>(u >> 8),
                                static_cast<unsigned char>(u >> 16),
                                static_cast<unsigned char>(u >> 24)};
    h = fnv64(b, 4, h);
  }
  return h;
}

static std::vector<std::string> read_corpus(const char* path, uint64_t* corpus_hash) {
  std::ifstream f(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (all.size() < 16 || all.compare(0, 8, "BTCORPUS") != 0) throw std::runtime_error("bad corpus");
  *corpus_hash = fnv64(all.data(), all.size());
  auto u32 = [&](size_t at) {
    return uint32_t(uint8_t(all[at])) | uint32_t(uint8_t(all[at + 1])) << 8 |
           uint32_t(uint8_t(all[at + 2])) << 16 | uint32_t(uint8_t(all[at + 3])) << 24;
  };
  const uint32_t n = u32(12);
  std::vector<std::string> out;
  size_t at = 16;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t len = u32(at);
    out.push_back(all.substr(at + 4, len));
    at += 4 + len;
  }
  return out;
}

static bool tokenize(const llama_vocab* vocab, const std::string& s, bool add, bool parse,
                     std::vector<llama_token>* ids) {
  try {
    ids->assign(s.size() + 8, 0);
    int n = llama_tokenize(vocab, s.data(), int32_t(s.size()), ids->data(), int32_t(ids->size()),
                           add, parse);
    if (n < 0) {
      ids->assign(size_t(-n), 0);
      n = llama_tokenize(vocab, s.data(), int32_t(s.size()), ids->data(), int32_t(ids->size()), add,
                         parse);
    }
    ids->resize(size_t(n));
    return true;
  } catch (const std::exception& e) {
    fprintf(stderr, "llama_tokenize threw: %s\n", e.what());
    return false;
  }
}

static std::string detokenize(const llama_vocab* vocab, const std::vector<llama_token>& ids,
                              bool rm, bool un) {
  std::string out(ids.size() * 16 + 64, '\0');
  int n = llama_detokenize(vocab, ids.data(), int32_t(ids.size()), out.data(), int32_t(out.size()),
                           rm, un);
  if (n < 0) {
    out.assign(size_t(-n), '\0');
    n = llama_detokenize(vocab, ids.data(), int32_t(ids.size()), out.data(), int32_t(out.size()),
                         rm, un);
  }
  out.resize(size_t(n));
  return out;
}

static std::string piece(const llama_vocab* vocab, llama_token id, bool special) {
  std::string out(64, '\0');
  int n = llama_token_to_piece(vocab, id, out.data(), int32_t(out.size()), 0, special);
  if (n < 0) {
    out.assign(size_t(-n), '\0');
    n = llama_token_to_piece(vocab, id, out.data(), int32_t(out.size()), 0, special);
  }
  out.resize(size_t(n));
  return out;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s VOCAB.gguf CORPUS.bin\n", argv[0]);
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  uint64_t corpus_hash = 0;
  const std::vector<std::string> corpus = read_corpus(argv[2], &corpus_hash);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  printf("H %zu %016llx\n", corpus.size(), (unsigned long long)corpus_hash);
  printf("V %d %d %d %d %d %d\n", n_vocab, llama_vocab_bos(vocab), llama_vocab_eos(vocab),
         llama_vocab_eot(vocab), int(llama_vocab_get_add_bos(vocab)),
         int(llama_vocab_get_add_eos(vocab)));
  for (int first = 0; first < n_vocab;) {
    const int attr = llama_vocab_get_attr(vocab, first);
    int count = 1;
    while (first + count < n_vocab && llama_vocab_get_attr(vocab, first + count) == attr) ++count;
    printf("A %d %d %d\n", first, count, attr);
    first += count;
  }
  printf("E");
  for (int id = 0; id < n_vocab; ++id) {
    if (llama_vocab_is_eog(vocab, id)) printf(" %d", id);
  }
  printf("\n");
  uint64_t hp1 = 0xcbf29ce484222325ull, hp0 = hp1;
  const unsigned char sep = 0xFF;
  for (int id = 0; id < n_vocab; ++id) {
    const std::string p1 = piece(vocab, id, true), p0 = piece(vocab, id, false);
    hp1 = fnv64(&sep, 1, fnv64(p1.data(), p1.size(), hp1));
    hp0 = fnv64(&sep, 1, fnv64(p0.data(), p0.size(), hp0));
  }
  printf("P %016llx %016llx\n", (unsigned long long)hp1, (unsigned long long)hp0);

  std::vector<llama_token> ids;
  for (size_t i = 0; i < corpus.size(); ++i) {
    printf("S %zu", i);
    std::vector<llama_token> last;
    bool last_ok = false;
    std::vector<llama_token> by_mode[4];
    bool ok[4] = {};
    for (int mode = 0; mode < 4; ++mode) {
      const bool add = mode >= 2, parse = (mode & 1) != 0;
      last_ok = ok[mode] = tokenize(vocab, corpus[i], add, parse, &ids);
      if (!last_ok) {
        printf(" X");
        continue;
      }
      by_mode[mode] = ids;
      last = ids;
      // Compression: "=" same ids as the previous mode; "^" the ids of mode-2 with the BOS
      // token in front (add_special on a vocabulary that adds only BOS).
      if (mode > 0 && ok[mode - 1] && by_mode[mode - 1] == ids) {
        printf(" =");
        continue;
      }
      if (mode >= 2 && ok[mode - 2] && !ids.empty() && ids[0] == llama_vocab_bos(vocab) &&
          std::vector<llama_token>(ids.begin() + 1, ids.end()) == by_mode[mode - 2]) {
        printf(" ^");
        continue;
      }
      printf(" %zu:%016llx", ids.size(), (unsigned long long)hash_ids(ids));
      if (ids.size() <= 8) {
        for (size_t k = 0; k < ids.size(); ++k) printf("%c%d", k == 0 ? ':' : ',', ids[k]);
      }
    }
    printf("\n");
    if (i % 4 == 0 && last_ok) {
      const std::string a = detokenize(vocab, last, false, false),
                        b = detokenize(vocab, last, true, true);
      printf("D %zu %zu:%016llx %zu:%016llx\n", i, a.size(),
             (unsigned long long)fnv64(a.data(), a.size()), b.size(),
             (unsigned long long)fnv64(b.data(), b.size()));
    }
  }
  llama_model_free(model);
  return 0;
}
