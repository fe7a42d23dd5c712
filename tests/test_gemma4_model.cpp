// Gemma 4 loading: configuration from metadata, zero-copy binding, and one clear error for each
// kind of bad file (wrong architecture, missing key, missing tensor, wrong shape).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/gemma4.h"
#include "model/gemma4_session.h"
#include "model/gemma4_synth.h"
#include "support/paths.h"
#include "util/error.h"

namespace boltrt {
namespace {

std::string synth(const std::string& preset, const std::string& name) {
  const std::string path = test::scratch_dir("gemma4_model_" + name) + "/model.gguf";
  model::Gemma4SynthOptions options;
  options.type = "f32";
  model::write_gemma4_synth(model::gemma4_preset(preset), options, path);
  return path;
}

// A copy of `file` with metadata and tensors passed through `edit_key` / `edit_tensor`
// (return false to drop the entry). The image lives in `bytes`.
std::unique_ptr<gguf::File> rewrite(const gguf::File& file, std::vector<uint8_t>& bytes,
                                    const std::function<bool(gguf::KeyValue&)>& edit_key,
                                    const std::function<bool(gguf::TensorInfo&)>& edit_tensor) {
  gguf::Writer w;
  for (gguf::KeyValue kv : file.metadata()) {
    if (kv.key == "general.alignment") continue;
    if (edit_key(kv)) w.set(kv.key, kv.value);
  }
  for (gguf::TensorInfo t : file.tensors()) {
    const uint8_t* data = file.tensor_data(t);
    if (!edit_tensor(t)) continue;
    std::vector<int64_t> ne(t.ne, t.ne + std::max<uint32_t>(t.n_dims, 1));
    w.add_tensor_data(t.name, t.type, ne, data);
  }
  bytes = w.write_to_memory();
  return gguf::File::parse(bytes, "edited.gguf");
}

std::string load_error(std::unique_ptr<gguf::File> file) {
  try {
    Gemma4Model m(std::move(file));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

auto keep_key = [](gguf::KeyValue&) { return true; };
auto keep_tensor = [](gguf::TensorInfo&) { return true; };

TEST(Gemma4Model, ConfigFromTinyE2bLikePreset) {
  const std::string path = synth("tiny-e2b-like", "config");
  const model::Gemma4Config want = model::gemma4_preset("tiny-e2b-like");
  auto m = Gemma4Model::load(path);
  const Gemma4Config& c = m->config();
  EXPECT_EQ(c.n_embd, want.n_embd);
  EXPECT_EQ(c.n_layer, want.n_layer);
  EXPECT_EQ(c.n_vocab, want.n_vocab);
  EXPECT_EQ(c.n_swa, want.sliding_window);
  EXPECT_EQ(c.n_embd_per_layer, want.n_embd_per_layer);
  EXPECT_EQ(c.n_layer_kv, want.n_layer - want.shared_kv_layers);
  EXPECT_FLOAT_EQ(c.logit_softcap, want.logit_softcap);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const Gemma4LayerConfig& l = c.layers[static_cast<size_t>(il)];
    EXPECT_EQ(l.sliding, want.is_swa[static_cast<size_t>(il)]) << il;
    EXPECT_EQ(l.head_dim, l.sliding ? want.head_dim_swa : want.head_dim_full) << il;
    EXPECT_EQ(l.n_head_kv, want.n_head_kv[static_cast<size_t>(il)]) << il;
    EXPECT_EQ(l.n_ff, want.n_ff[static_cast<size_t>(il)]) << il;
    EXPECT_FLOAT_EQ(l.rope_base, l.sliding ? want.rope_base_swa : want.rope_base_full);
    if (il >= c.n_layer_kv) {  // llama.cpp's reuse rule
      EXPECT_EQ(l.kv_source, c.n_layer_kv - (l.sliding ? 2 : 1)) << il;
    } else {
      EXPECT_EQ(l.kv_source, -1) << il;
    }
  }
  // shared layers own no cache
  const auto layout = m->kv_layout();
  for (int64_t il = c.n_layer_kv; il < c.n_layer; ++il) {
    EXPECT_EQ(layout[static_cast<size_t>(il)].row_size, 0);
  }
}

TEST(Gemma4Model, WeightsAreViewsIntoTheMapping) {
  const std::string path = synth("tiny", "mapping");
  auto m = Gemma4Model::load(path);
  const auto* begin = m->file().tensor_data(m->file().tensors().front());
  const auto* end = begin + m->file().file_size();
  for (const gguf::TensorInfo& t : m->file().tensors()) {
    const uint8_t* p = m->file().tensor_data(t);
    EXPECT_TRUE(p >= begin && p + t.nbytes <= end) << t.name;
  }
  const auto& layer = m->layer(0);
  const auto* q = static_cast<const uint8_t*>(layer.attn_q.w.data);
  EXPECT_EQ(q, m->file().tensor_data(*m->file().find_tensor("blk.0.attn_q.weight")));
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(layer.attn_norm.data),
            m->file().tensor_data(*m->file().find_tensor("blk.0.attn_norm.weight")));
}

TEST(Gemma4Model, RejectsWrongArchitecture) {
  auto file = gguf::File::open(synth("tiny", "arch"));
  std::vector<uint8_t> bytes;
  auto edited = rewrite(
      *file, bytes,
      [](gguf::KeyValue& kv) {
        if (kv.key == "general.architecture") kv.value.data = std::string("llama");
        return true;
      },
      keep_tensor);
  EXPECT_NE(load_error(std::move(edited)).find("general.architecture is 'llama'"),
            std::string::npos);
}

TEST(Gemma4Model, RejectsMissingKey) {
  auto file = gguf::File::open(synth("tiny", "key"));
  std::vector<uint8_t> bytes;
  auto edited = rewrite(
      *file, bytes, [](gguf::KeyValue& kv) { return kv.key != "gemma4.attention.sliding_window"; },
      keep_tensor);
  EXPECT_EQ(load_error(std::move(edited)),
            "edited.gguf: missing key 'gemma4.attention.sliding_window'");
}

TEST(Gemma4Model, RejectsMissingTensor) {
  auto file = gguf::File::open(synth("tiny", "tensor"));
  std::vector<uint8_t> bytes;
  auto edited = rewrite(*file, bytes, keep_key,
                        [](gguf::TensorInfo& t) { return t.name != "blk.2.ffn_down.weight"; });
  EXPECT_EQ(load_error(std::move(edited)), "edited.gguf: missing tensor 'blk.2.ffn_down.weight'");
}

TEST(Gemma4Model, RejectsWrongShape) {
  auto file = gguf::File::open(synth("tiny", "shape"));
  std::vector<uint8_t> bytes;
  auto edited = rewrite(*file, bytes, keep_key, [](gguf::TensorInfo& t) {
    if (t.name == "blk.1.ffn_down.weight") std::swap(t.ne[0], t.ne[1]);
    return true;
  });
  const std::string error = load_error(std::move(edited));
  EXPECT_NE(error.find("tensor 'blk.1.ffn_down.weight' has shape"), std::string::npos) << error;
}

TEST(Gemma4Session, RejectsBadTokensAndOverflow) {
  auto m = Gemma4Model::load(synth("tiny", "session"));
  SessionOptions o;
  o.n_ctx = 4;
  Gemma4Session s(*m, o, nullptr);
  const std::vector<int32_t> bad = {2, static_cast<int32_t>(m->config().n_vocab)};
  EXPECT_THROW(s.decode(bad), Error);
  EXPECT_EQ(s.n_past(), 0);
  const std::vector<int32_t> five = {2, 3, 4, 5, 6};
  EXPECT_THROW(s.decode(five), Error);
  const std::vector<int32_t> four = {2, 3, 4, 5};
  EXPECT_EQ(s.decode(four).size(), static_cast<size_t>(m->config().n_vocab));
  EXPECT_EQ(s.n_past(), 4);
}

}  // namespace
}  // namespace boltrt
