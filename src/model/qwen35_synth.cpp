#include "model/qwen35_synth.h"

#include <cmath>
#include <memory>
#include <unordered_set>

#include "gguf/gguf_writer.h"
#include "model/synth_weights.h"
#include "quant/ggml_type.h"
#include "runtime/thread_pool.h"
#include "util/error.h"

namespace boltrt::model {

namespace {

// Released shapes from shared/docs/qwen35.md §2.5; tiny is a small layout for tests (D 256 so
// that K-quant blocks fit the rows, Hk 2 < Hv 4 so the tiled head pairing matters).
struct PresetRule {
  std::string_view name;
  int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_rot;
  int64_t n_k_head, n_v_head, d_state;
  bool tied;
  int64_t n_vocab;
};

constexpr PresetRule kPresets[] = {
    {"tiny", 8, 256, 512, 4, 2, 64, 16, 2, 4, 32, true, 512},
    {"0.8b", 24, 1024, 3584, 8, 2, 256, 64, 16, 16, 128, true, 248320},
    {"2b", 24, 2048, 6144, 8, 2, 256, 64, 16, 16, 128, true, 248320},
    {"4b", 32, 2560, 9216, 16, 4, 256, 64, 16, 32, 128, true, 248320},
    {"9b", 32, 4096, 12288, 16, 4, 256, 64, 16, 32, 128, false, 248320},
    {"27b", 64, 5120, 17408, 24, 4, 256, 64, 16, 48, 128, false, 248320},
};

// ---- vocabulary: a small byte-level BPE ("gpt2" model, "qwen35" pre-tokenizer) --------------

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's printable alphabet: bytes ! .. ~, ¡ .. ¬, ® .. ÿ are themselves, the other 68 bytes
// map to U+0100 upward in byte order (space -> Ġ, newline -> Ċ).
std::string byte_symbol(int b) {
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  if (printable) return utf8(static_cast<uint32_t>(b));
  int n = 0;
  for (int c = 0; c < b; ++c) {
    const bool p = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
    n += p ? 0 : 1;
  }
  return utf8(static_cast<uint32_t>(0x100 + n));
}

constexpr const char* kWords[] = {
    "the",  "and",   "hello", "world", "is",  "of",    "to",  "in",  "it", "you", "that", "this",
    "what", "model", "token", "one",   "two", "three", "cat", "dog", "a",  "an",  "on",   "for",
};

// ChatML turns; the tool-call markers make llama.cpp and boltrt pick the Qwen3.5 chat format.
constexpr const char* kChatTemplate =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
    "{#- tool calls: <tool_call> <function=NAME> <parameter=ARG> -#}";

struct Vocab {
  std::vector<std::string> tokens, merges;
  std::vector<int32_t> types;
  uint32_t eos_id = 0;
};

Vocab build_vocab(int64_t n_vocab) {
  Vocab v;
  std::unordered_set<std::string> seen;
  auto add = [&](const std::string& text, int32_t type) {
    if (!seen.insert(text).second) return;
    v.tokens.push_back(text);
    v.types.push_back(type);
  };
  for (int b = 0; b < 256; ++b) add(byte_symbol(b), kNormal);
  const std::string space = byte_symbol(' '), newline = byte_symbol('\n');
  v.merges.push_back(newline + " " + newline);
  add(newline + newline, kNormal);
  for (const char* w : kWords) {
    for (bool with_space : {true, false}) {
      std::string prefix = with_space ? space : std::string(1, w[0]);
      for (size_t i = with_space ? 0 : 1; w[i] != '\0'; ++i) {
        const std::string next(1, w[i]);
        const std::string merge = prefix + " " + next;
        prefix += next;
        if (seen.count(prefix)) continue;
        v.merges.push_back(merge);
        add(prefix, kNormal);
      }
    }
  }
  v.eos_id = static_cast<uint32_t>(v.tokens.size());
  add("<|endoftext|>", kControl);
  add("<|im_start|>", kControl);
  add("<|im_end|>", kControl);
  for (const char* t : {"<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
                        "</tool_response>"}) {
    add(t, kUserDefined);
  }
  // Padding up to the embedding rows, as convert_hf_to_gguf writes it for ids the tokenizer
  // lacks: "[PAD<id>]", type UNUSED. No merge produces them; they detokenize to nothing and a
  // grammar never allows them (llama.cpp gives them an empty piece), so a random-weight model
  // that samples one shows no "[PAD..]" text.
  while (static_cast<int64_t>(v.tokens.size()) < n_vocab) {
    add(fmt::format("[PAD{}]", v.tokens.size()), kUnused);
  }
  return v;
}

void write_vocab(gguf::Writer& w, const Vocab& v) {
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen35");
  w.set_array_string("tokenizer.ggml.tokens", v.tokens);
  w.set_array_i32("tokenizer.ggml.token_type", v.types);
  w.set_array_string("tokenizer.ggml.merges", v.merges);
  w.set_u32("tokenizer.ggml.eos_token_id", v.eos_id);
  w.set_u32("tokenizer.ggml.bos_token_id", v.eos_id);
  w.set_u32("tokenizer.ggml.padding_token_id", v.eos_id);
  w.set_string("tokenizer.chat_template", kChatTemplate);
}

void check_config(const Qwen35SynthConfig& c) {
  auto need = [&](bool ok, std::string_view what) {
    if (!ok) fail("qwen35 synth config '{}': {}", c.preset, what);
  };
  need(c.n_layer >= 2 && c.n_layer <= 512, "trunk layers must be 2..512");
  need(c.n_nextn >= 0 && c.n_nextn <= 4, "MTP blocks must be 0..4");
  need(c.n_embd > 0 && c.n_ff > 0 && c.n_head > 0 && c.head_dim > 0, "sizes must be > 0");
  need(c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0, "head_count must be a multiple of kv");
  need(c.n_rot > 0 && c.n_rot <= c.head_dim && c.n_rot % 2 == 0, "n_rot must be even, <= hd");
  need(c.n_k_head > 0 && c.n_v_head % c.n_k_head == 0, "value heads must be a multiple of Hk");
  need(c.d_state > 0 && c.conv_kernel >= 1, "state size and conv kernel must be > 0");
  need(c.full_attention_interval > 0, "full_attention_interval must be > 0");
  need(c.recurrent_layers.empty() ||
           static_cast<int64_t>(c.recurrent_layers.size()) == c.n_layer + c.n_nextn,
       "recurrent_layers must have block_count entries");
  need(c.n_vocab > 0 && c.context_length > 0, "vocab and context must be > 0");
}

bool is_gdn(const Qwen35SynthConfig& c, int64_t il) {
  if (!c.recurrent_layers.empty()) return c.recurrent_layers[static_cast<size_t>(il)];
  return il < c.n_layer && (il + 1) % c.full_attention_interval != 0;
}

std::vector<SynthTensor> build_tensors(const Qwen35SynthConfig& c, std::string_view type) {
  std::vector<SynthTensor> t;
  const int64_t D = c.n_embd, V = c.n_vocab, hd = c.head_dim;
  const int64_t dk = c.d_state, Hk = c.n_k_head, Hv = c.n_v_head;
  const int64_t C = 2 * Hk * dk + Hv * dk;  // conv channels [q | k | v]
  auto matrix = [&](std::string name, std::vector<int64_t> ne) {
    SynthTensor s{std::move(name), std::move(ne), GgmlType::F32, {}};
    s.type = synth_matrix_type(type, s.ne[0]);
    s.init = WeightInit::normal(0.0, 1.0 / std::sqrt(double(s.ne[0])));
    t.push_back(std::move(s));
  };
  auto vec = [&](std::string name, std::vector<int64_t> ne, WeightInit init) {
    t.push_back(SynthTensor{std::move(name), std::move(ne), GgmlType::F32, init});
  };
  // norm weights already hold HF's +1 (§3.6): multiplicative, near 1
  auto norm = [&](std::string name, int64_t n) {
    vec(std::move(name), {n}, WeightInit::normal(1.0, 0.1));
  };

  matrix("token_embd.weight", {D, V});
  norm("output_norm.weight", D);
  if (!c.tied_output) matrix("output.weight", {D, V});
  const int64_t n_block = c.n_layer + c.n_nextn;
  for (int64_t il = 0; il < n_block; ++il) {
    auto n = [&](std::string_view part) { return fmt::format("blk.{}.{}", il, part); };
    norm(n("attn_norm.weight"), D);
    if (is_gdn(c, il)) {
      matrix(n("attn_qkv.weight"), {D, C});
      matrix(n("attn_gate.weight"), {D, Hv * dk});
      // taps of a depthwise conv over Kc inputs: unit gain on average
      vec(n("ssm_conv1d.weight"), {c.conv_kernel, C},
          WeightInit::normal(0.0, 1.0 / std::sqrt(double(c.conv_kernel))));
      vec(n("ssm_dt.bias"), {Hv}, WeightInit::normal(0.0, 0.5));
      // ssm_a = -exp(A_log): negative, so the decay exp(softplus(.) * ssm_a) is in (0, 1)
      vec(n("ssm_a"), {Hv}, WeightInit::normal(-1.0, 0.2));
      matrix(n("ssm_beta.weight"), {D, Hv});
      matrix(n("ssm_alpha.weight"), {D, Hv});
      norm(n("ssm_norm.weight"), dk);
      matrix(n("ssm_out.weight"), {Hv * dk, D});
    } else {
      matrix(n("attn_q.weight"), {D, 2 * c.n_head * hd});  // [q_h | gate_h] per head
      matrix(n("attn_k.weight"), {D, c.n_head_kv * hd});
      matrix(n("attn_v.weight"), {D, c.n_head_kv * hd});
      matrix(n("attn_output.weight"), {c.n_head * hd, D});
      norm(n("attn_q_norm.weight"), hd);
      norm(n("attn_k_norm.weight"), hd);
    }
    norm(n("post_attention_norm.weight"), D);
    matrix(n("ffn_gate.weight"), {D, c.n_ff});
    matrix(n("ffn_up.weight"), {D, c.n_ff});
    matrix(n("ffn_down.weight"), {c.n_ff, D});
    if (il >= c.n_layer) {  // MTP block (§3.5)
      matrix(n("nextn.eh_proj.weight"), {2 * D, D});
      norm(n("nextn.enorm.weight"), D);
      norm(n("nextn.hnorm.weight"), D);
      norm(n("nextn.shared_head_norm.weight"), D);
    }
  }
  if (!synth_uniform_type(type)) apply_synth_quant_mix(t, "qwen35", n_block, 0, type);
  return t;
}

}  // namespace

std::vector<std::string> qwen35_preset_names() {
  return preset_names(kPresets);
}

Qwen35SynthConfig qwen35_preset(std::string_view name, int64_t n_layer) {
  const PresetRule* rule = &find_preset(kPresets, "qwen35", name);
  Qwen35SynthConfig c;
  c.preset = std::string(name);
  c.n_layer = n_layer > 0 ? n_layer : rule->n_layer;
  c.n_embd = rule->n_embd;
  c.n_ff = rule->n_ff;
  c.n_head = rule->n_head;
  c.n_head_kv = rule->n_head_kv;
  c.head_dim = rule->head_dim;
  c.n_rot = rule->n_rot;
  // released [11, 11, 10, 0] for n_rot 64; tiny scales it to n_rot 16: [3, 3, 2, 0]
  c.rope_sections = rule->n_rot == 64 ? std::array<int64_t, 4>{11, 11, 10, 0}
                                      : std::array<int64_t, 4>{3, 3, 2, 0};
  c.n_k_head = rule->n_k_head;
  c.n_v_head = rule->n_v_head;
  c.d_state = rule->d_state;
  c.tied_output = rule->tied;
  c.n_vocab = rule->n_vocab;
  c.context_length = rule->name == "tiny" ? 4096 : 262144;
  return c;
}

Qwen35SynthStats write_qwen35_synth(const Qwen35SynthConfig& c, const Qwen35SynthOptions& options,
                                    const std::string& path) {
  check_config(c);
  const uint32_t file_type = synth_file_type(options.type);
  const Vocab vocab = build_vocab(c.n_vocab);
  Qwen35SynthConfig config = c;
  config.n_vocab = static_cast<int64_t>(vocab.tokens.size());

  gguf::Writer w;
  const std::string a = "qwen35.";
  const int64_t n_block = config.n_layer + config.n_nextn;
  w.set_string("general.architecture", "qwen35");
  w.set_string("general.name",
               fmt::format("boltrt synthetic qwen35 {} seed {}", c.preset, options.seed));
  w.set_u32("general.file_type", file_type);
  if (file_type != 0 && file_type != 1 && file_type != 32)
    w.set_u32("general.quantization_version", 2);
  w.set_u32(a + "context_length", static_cast<uint32_t>(config.context_length));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(config.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(n_block));
  if (config.n_nextn > 0) {
    w.set_u32(a + "nextn_predict_layers", static_cast<uint32_t>(config.n_nextn));
  }
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(config.n_ff));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(config.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(config.n_head_kv));
  w.set_u32(a + "attention.key_length", static_cast<uint32_t>(config.head_dim));
  w.set_u32(a + "attention.value_length", static_cast<uint32_t>(config.head_dim));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", config.rms_eps);
  w.set_u32(a + "rope.dimension_count", static_cast<uint32_t>(config.n_rot));
  const std::vector<int32_t> sections(config.rope_sections.begin(), config.rope_sections.end());
  w.set_array_i32(a + "rope.dimension_sections", sections);
  w.set_f32(a + "rope.freq_base", config.rope_base);
  w.set_u32(a + "ssm.conv_kernel", static_cast<uint32_t>(config.conv_kernel));
  w.set_u32(a + "ssm.state_size", static_cast<uint32_t>(config.d_state));
  w.set_u32(a + "ssm.group_count", static_cast<uint32_t>(config.n_k_head));
  w.set_u32(a + "ssm.time_step_rank", static_cast<uint32_t>(config.n_v_head));
  w.set_u32(a + "ssm.inner_size", static_cast<uint32_t>(config.n_v_head * config.d_state));
  if (config.recurrent_layers.empty()) {
    w.set_u32(a + "full_attention_interval", static_cast<uint32_t>(config.full_attention_interval));
  } else {
    w.set_array_bool(a + "attention.recurrent_layers", config.recurrent_layers);
  }
  write_vocab(w, vocab);

  const std::vector<SynthTensor> tensors = build_tensors(config, options.type);
  Qwen35SynthStats stats;
  for (const SynthTensor& s : tensors) {
    int64_t elements = 1;
    for (int64_t d : s.ne) elements *= d;
    stats.n_params += static_cast<uint64_t>(elements);
  }
  std::unique_ptr<ThreadPool> pool;
  if (options.threads > 1) pool = std::make_unique<ThreadPool>(options.threads);
  const bool random_blocks =
      options.random_blocks < 0 ? stats.n_params > 300'000'000 : options.random_blocks > 0;
  add_synth_tensors(w, tensors, options.seed, random_blocks, options.zero_weights, pool);
  stats.n_tensors = tensors.size();
  stats.file_bytes = w.file_size();
  stats.n_vocab = config.n_vocab;
  w.write(path);
  return stats;
}

}  // namespace boltrt::model
