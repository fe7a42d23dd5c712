// Writes tests/data/sampler/goldens.txt: for each case in sampler_cases.h, the token ids that
// libllama's default sampler chain (as common_sampler builds it: penalties, top-k, top-p, min-p,
// temperature, dist) picks on the generated logits. Not built by CMake. Build and run:
//
//   R=$HOME/.cache/llama-ref
//   g++ -std=c++17 -O2 -I$R/src/include -I$R/src/ggml/include \
//       tests/data/sampler/make_sampler_goldens.cpp -L$R/build/bin -lllama -lggml-base \
//       -Wl,-rpath,$R/build/bin -o /tmp/make_sampler_goldens
//   /tmp/make_sampler_goldens > tests/data/sampler/goldens.txt
#include <llama.h>

#include <cstdio>
#include <vector>

#include "sampler_cases.h"

int main() {
  using namespace sampler_cases;
  std::printf(
      "# case: %d token ids from libllama's default sampler chain (make_sampler_goldens.cpp)\n",
      kSteps);
  int case_index = 0;
  for (const Case& c : kCases) {
    llama_sampler* chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    llama_sampler_chain_add(
        chain, llama_sampler_init_penalties(c.n_vocab, c.penalty_last_n, c.repeat_penalty,
                                            c.frequency_penalty, c.presence_penalty));
    llama_sampler_chain_add(chain, llama_sampler_init_top_k(c.top_k));
    llama_sampler_chain_add(chain, llama_sampler_init_top_p(c.top_p, c.min_keep));
    llama_sampler_chain_add(chain, llama_sampler_init_min_p(c.min_p, c.min_keep));
    llama_sampler_chain_add(chain, llama_sampler_init_temp_ext(c.temperature, 0.0f, 1.0f));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(c.seed));
    for (int i = 0; i < kPromptTokens; ++i)
      llama_sampler_accept(chain, prompt_token(c, case_index, i));

    std::printf("%s:", c.name);
    std::vector<llama_token_data> cur;
    for (int step = 0; step < kSteps; ++step) {
      const std::vector<float> row = logits(c, case_index, step);
      cur.resize(row.size());
      for (size_t i = 0; i < row.size(); ++i) cur[i] = {static_cast<llama_token>(i), row[i], 0.0f};
      llama_token_data_array array = {cur.data(), cur.size(), -1, false};
      llama_sampler_apply(chain, &array);
      const llama_token token = array.data[array.selected].id;
      llama_sampler_accept(chain, token);
      std::printf(" %d", token);
    }
    std::printf("\n");
    llama_sampler_free(chain);
    ++case_index;
  }
  return 0;
}
