#include "model/synth_vocab.h"

#include <unordered_set>

#include "util/error.h"

namespace boltrt::model {

namespace {

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;
const std::string kSpace = "\xe2\x96\x81";  // U+2581, Gemma's visible space

// Words that get whole-word merges, with and without the leading space marker.
constexpr const char* kWords[] = {
    "the",  "and",   "hello", "world", "is",  "of",    "to",  "in",  "it", "you", "that", "this",
    "what", "model", "token", "one",   "two", "three", "cat", "dog", "a",  "an",  "on",   "for",
};

// A compact chat template in the shape of Gemma 4's (turn markers, "model" for the assistant).
// A minimal Gemma 4 template. Its tool-call branch carries the '<|tool_call>call:' literal by
// which llama.cpp and boltrt recognise a Gemma 4 template (without it, chat on a synthetic model
// warns that the template is unknown).
constexpr const char* kChatTemplate =
    "{{ bos_token }}{% for message in messages %}<|turn>"
    "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
    "{{ message['content'] | trim }}"
    "{% if message['tool_calls'] is defined %}{% for call in message['tool_calls'] %}"
    "{{ '<|tool_call>call:' + call['function']['name'] + '{}<tool_call|>' }}"
    "{% endfor %}{% endif %}<turn|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n{% endif %}";

}  // namespace

SynthVocab build_synth_vocab(int64_t n_vocab) {
  SynthVocab v;
  std::unordered_set<std::string> seen;
  auto add = [&](const std::string& text, int32_t type) {
    if (!seen.insert(text).second) return;
    v.tokens.push_back(text);
    v.scores.push_back(type == kControl ? -1000.0f : 0.0f);
    v.token_types.push_back(type);
  };
  add("<pad>", kControl);
  add("<eos>", kControl);
  add("<bos>", kControl);
  add("<unk>", kUnknown);
  add("<mask>", kControl);
  for (const char* t :
       {"<|turn>", "<turn|>", "<|think|>", "<|tool>", "<tool|>", "<|tool_response>"}) {
    add(t, kControl);
  }
  for (const char* t :
       {"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<tool_response|>", "<|\"|>"}) {
    add(t, kUserDefined);
  }
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), kByte);
  add("\n", kNormal);
  add(kSpace, kNormal);
  for (int c = 0x21; c < 0x7f; ++c) add(std::string(1, static_cast<char>(c)), kNormal);
  // Newline runs are looked up whole (llama.cpp's gemma4 rule); merges make them reachable too.
  add("\n\n", kNormal);
  v.merges.push_back("\n \n");
  add("\n\n\n", kNormal);
  v.merges.push_back("\n\n \n");
  // Left-to-right merges for each word, e.g. "▁ t", "▁t h", "▁th e".
  std::unordered_set<std::string> merged;
  auto add_word = [&](const std::string& word, bool space) {
    std::string prefix = space ? kSpace : std::string(1, word[0]);
    for (size_t i = space ? 0 : 1; i < word.size(); ++i) {
      std::string next(1, word[i]);
      std::string m = prefix + " " + next;
      if (merged.insert(m).second) v.merges.push_back(m);
      prefix += next;
      add(prefix, kNormal);
    }
  };
  for (const char* w : kWords) {
    add_word(w, true);
    add_word(w, false);
  }
  for (int64_t i = 0; static_cast<int64_t>(v.tokens.size()) < n_vocab; ++i) {
    add(fmt::format("<unused{}>", i), kUnused);
  }
  return v;
}

void write_synth_vocab(gguf::Writer& w, const SynthVocab& v) {
  w.set_string("tokenizer.ggml.model", "gemma4");
  w.set_array_string("tokenizer.ggml.tokens", v.tokens);
  w.set_array_f32("tokenizer.ggml.scores", v.scores);
  w.set_array_i32("tokenizer.ggml.token_type", v.token_types);
  w.set_array_string("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.bos_token_id", v.bos_id);
  w.set_u32("tokenizer.ggml.eos_token_id", v.eos_id);
  w.set_u32("tokenizer.ggml.unknown_token_id", v.unk_id);
  w.set_u32("tokenizer.ggml.padding_token_id", v.pad_id);
  w.set_bool("tokenizer.ggml.add_bos_token", true);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.set_string("tokenizer.chat_template", kChatTemplate);
}

}  // namespace boltrt::model
