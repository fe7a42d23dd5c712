// llama.cpp's own sampler chain on logits that another engine computed. Compiled by the tests at
// run time against the reference build (shared/tools/llama-ref: headers in src/include and
// src/ggml/include, libraries in build/bin), never by CMake: boltrt does not link llama.cpp.
//
// Usage: llama_sampler_chain MODEL LOGITS PROMPT_IDS [--top-k K] [--top-p P] [--min-p P]
//          [--temp T] [--seed S] [--repeat-last-n N] [--repeat-penalty R]
//          [--frequency-penalty F] [--presence-penalty F]
//   MODEL       a GGUF file; only its vocabulary is read (size, suppress tokens)
//   LOGITS      one row per sampling step, "pos argmax v0 ... v(n_vocab-1)" (boltrt logits)
//   PROMPT_IDS  comma-separated ids the chain accepts before the first step, as
//               llama-completion does for its prompt (the penalties see them)
// Prints the token each step samples, one per line; after each step the sampled token is
// accepted, so the chain's state (penalty window, random stream) follows a generation.
//
// The chain is the one common/sampling.cpp builds for llama-completion's default sampler list:
// logit bias (the vocabulary's suppress tokens), penalties, top-n-sigma, top-k, typical, top-p,
// min-p, XTC, temperature, dist. DRY is left out: its multiplier defaults to 0 (disabled).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "llama.h"

namespace {

struct Options {
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float temp = 0.8f;
  unsigned seed = 0;
  int repeat_last_n = 64;
  float repeat_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
};

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s MODEL LOGITS PROMPT_IDS [options]\n", argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return usage(argv[0]);
  Options o;
  const std::pair<const char*, int*> ints[] = {{"--top-k", &o.top_k},
                                               {"--repeat-last-n", &o.repeat_last_n}};
  const std::pair<const char*, float*> floats[] = {{"--top-p", &o.top_p},
                                                   {"--min-p", &o.min_p},
                                                   {"--temp", &o.temp},
                                                   {"--repeat-penalty", &o.repeat_penalty},
                                                   {"--frequency-penalty", &o.frequency_penalty},
                                                   {"--presence-penalty", &o.presence_penalty}};
  for (int i = 4; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const char* value = argv[i + 1];
    bool known = key == "--seed";
    if (known) o.seed = static_cast<unsigned>(std::strtoul(value, nullptr, 10));
    for (const auto& [name, field] : ints) {
      if (key == name) *field = std::atoi(value), known = true;
    }
    for (const auto& [name, field] : floats) {
      if (key == name) *field = std::strtof(value, nullptr), known = true;
    }
    if (!known) return usage(argv[0]);
  }

  llama_backend_init();
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  {
    int32_t n_suppress = 0;
    const llama_token* suppress = llama_vocab_get_suppress_tokens(vocab, &n_suppress);
    std::vector<llama_logit_bias> biases;
    for (int32_t i = 0; i < n_suppress; ++i) biases.push_back({suppress[i], -INFINITY});
    if (!biases.empty()) {
      llama_sampler_chain_add(
          chain, llama_sampler_init_logit_bias(n_vocab, static_cast<int32_t>(biases.size()),
                                               biases.data()));
    }
  }
  llama_sampler_chain_add(chain,
                          llama_sampler_init_penalties(n_vocab, o.repeat_last_n, o.repeat_penalty,
                                                       o.frequency_penalty, o.presence_penalty));
  llama_sampler_chain_add(chain, llama_sampler_init_top_n_sigma(-1.0f));
  llama_sampler_chain_add(chain, llama_sampler_init_top_k(o.top_k));
  llama_sampler_chain_add(chain, llama_sampler_init_typical(1.0f, 0));
  llama_sampler_chain_add(chain, llama_sampler_init_top_p(o.top_p, 0));
  llama_sampler_chain_add(chain, llama_sampler_init_min_p(o.min_p, 0));
  llama_sampler_chain_add(chain, llama_sampler_init_xtc(0.0f, 0.1f, 0, o.seed));
  llama_sampler_chain_add(chain, llama_sampler_init_temp_ext(o.temp, 0.0f, 1.0f));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(o.seed));

  std::stringstream prompt(argv[3]);
  for (std::string id; std::getline(prompt, id, ',');) {
    llama_sampler_accept(chain, std::atoi(id.c_str()));
  }

  std::ifstream rows(argv[2]);
  std::vector<llama_token_data> cur(static_cast<size_t>(n_vocab));
  for (std::string line; std::getline(rows, line);) {
    std::istringstream fields(line);
    long pos = 0, argmax = 0;
    fields >> pos >> argmax;
    for (int v = 0; v < n_vocab; ++v) {
      float logit = 0;
      if (!(fields >> logit)) {
        std::fprintf(stderr, "row %ld: fewer than %d logits\n", pos, n_vocab);
        return 1;
      }
      cur[static_cast<size_t>(v)] = {v, logit, 0.0f};
    }
    llama_token_data_array array = {cur.data(), cur.size(), -1, false};
    llama_sampler_apply(chain, &array);
    const llama_token token = array.data[array.selected].id;
    llama_sampler_accept(chain, token);
    std::printf("%d\n", token);
  }
  llama_sampler_free(chain);
  llama_model_free(model);
  return 0;
}
