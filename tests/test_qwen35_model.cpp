// Qwen35Model::load and Qwen35Session on a synthetic model: a file with a missing or misshapen
// tensor (or a dense file carrying a router) is one clear error naming the file and the tensor;
// the recurrent state has the size of §5.1; rollback to any earlier position and copy_prefix
// reproduce the bits of an uninterrupted run (the reference logits here are boltrt's own; the
// llama.cpp comparison is test_qwen35_parity).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "boltrt/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/qwen35.h"
#include "model/qwen35_session.h"
#include "model/qwen35_synth.h"
#include "runtime/thread_pool.h"
#include "support/paths.h"

namespace boltrt {
namespace {

std::string synth_tiny(const std::string& dir) {
  const std::string path = dir + "/tiny.gguf";
  model::write_qwen35_synth(model::qwen35_preset("tiny"), {}, path);
  return path;
}

// Copies `src` to `dst`, letting `edit` drop (return false) or reshape a tensor's record.
void rewrite(const std::string& src, const std::string& dst,
             const std::function<bool(gguf::TensorInfo&)>& edit) {
  auto file = gguf::File::open(src);
  gguf::Writer w;
  for (const gguf::KeyValue& kv : file->metadata()) w.set(kv.key, kv.value);
  for (gguf::TensorInfo t : file->tensors()) {
    const void* data = file->tensor_data(t);
    const uint64_t bytes = t.nbytes;
    if (!edit(t)) continue;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    w.add_tensor(t.name, t.type, ne, [data, bytes](gguf::TensorSink& sink) {
      sink.write(data, static_cast<size_t>(bytes));
    });
  }
  w.write(dst);
}

std::string load_error(const std::string& path) {
  try {
    Qwen35Model::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "loaded";
}

TEST(Qwen35Model, BadFilesAreOneClearError) {
  const std::string dir = test::scratch_dir("qwen35_model_bad");
  const std::string good = synth_tiny(dir);
  rewrite(good, dir + "/missing.gguf",
          [](gguf::TensorInfo& t) { return t.name != "blk.2.ssm_conv1d.weight"; });
  EXPECT_EQ(load_error(dir + "/missing.gguf"),
            dir + "/missing.gguf: missing tensor 'blk.2.ssm_conv1d.weight'");
  // same bytes, rows and columns swapped: [256, 4] read as [4, 256]
  rewrite(good, dir + "/shape.gguf", [](gguf::TensorInfo& t) {
    if (t.name == "blk.0.ssm_alpha.weight") std::swap(t.ne[0], t.ne[1]);
    return true;
  });
  EXPECT_EQ(load_error(dir + "/shape.gguf"),
            dir +
                "/shape.gguf: tensor 'blk.0.ssm_alpha.weight' has shape [4, 256, 1, 1], expected "
                "[256, 4, 1, 1]");
  EXPECT_NE(load_error(dir + "/nothere.gguf").find("nothere.gguf"), std::string::npos);
}

TEST(Qwen35Session, StateSizeRollbackAndCopyPrefixReproduceTheBits) {
  const std::string dir = test::scratch_dir("qwen35_session");
  auto m = Qwen35Model::load(synth_tiny(dir));
  const Qwen35Config& c = m->config();
  // 6 GDN layers: conv window 3 × 256 channels, 4 delta states of 32 × 32
  EXPECT_EQ(c.recurrent_state_bytes(), 6 * (3 * 256 + 4 * 32 * 32) * 4);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 7919 + 13) % 512);
  const int64_t V = m->n_vocab();
  ThreadPool pool(2);
  SessionOptions opts;
  opts.n_ctx = 64;
  opts.n_batch = 16;
  opts.kv_type = KvType::F32;

  Qwen35Session ref(*m, opts, &pool);
  auto all = ref.decode(prompt, true);
  const std::vector<float> expected(all.begin(), all.end());
  EXPECT_EQ(ref.recurrent_state_bytes(), static_cast<size_t>(c.recurrent_state_bytes()));
  auto row = [&](int64_t pos) {
    return std::vector<float>(expected.begin() + pos * V, expected.begin() + (pos + 1) * V);
  };

  Qwen35Session s(*m, opts, nullptr);
  s.decode(std::span<const int32_t>(prompt).subspan(0, 20));  // no checkpoint (starts at 0)
  for (int64_t p = 20; p < 30; ++p) s.decode(std::span<const int32_t>(&prompt[p], 1));
  // checkpoints of the last two calls: at 28 and 29
  EXPECT_EQ(s.checkpoint_positions(), (std::vector<int64_t>{28, 29}));
  EXPECT_EQ(s.recurrent_memory_bytes(), 3 * s.recurrent_state_bytes());
  for (const int64_t back : {29, 28, 25, 7, 0}) {  // checkpoint, checkpoint, recompute ...
    s.rollback(back);
    EXPECT_EQ(s.n_past(), back);
    auto out = s.decode(std::span<const int32_t>(&prompt[back], 1));
    EXPECT_EQ(std::vector<float>(out.begin(), out.end()), row(back)) << "rollback to " << back;
  }
  EXPECT_THROW(s.rollback(5), Error);  // beyond n_past (1)

  Qwen35Session a(*m, opts, &pool);
  a.decode(std::span<const int32_t>(prompt).subspan(0, 30));
  Qwen35Session b(*m, opts, &pool);
  b.copy_prefix(a, 22);
  EXPECT_EQ(b.n_past(), 22);
  auto out = b.decode(std::span<const int32_t>(prompt).subspan(22, 18), true);
  EXPECT_EQ(std::vector<float>(out.begin(), out.end()),
            std::vector<float>(expected.begin() + 22 * V, expected.end()));
}

}  // namespace
}  // namespace boltrt
