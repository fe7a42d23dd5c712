// boltrt inspect: a GGUF file's header, key hyper-parameters, metadata (long arrays and strings
// abbreviated), tensor table and totals; --json for scripts; --tensor NAME --values N dumps
// dequantized values. Only the metadata is parsed; tensor data stays mapped and untouched, so a
// multi-GB model prints in well under a second.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "command.h"
#include "gguf/gguf.h"
#include "quant/dequantize.h"
#include "util/error.h"

namespace {

using boltrt::GgmlType;
using boltrt::gguf::Array;
using boltrt::gguf::File;
using boltrt::gguf::TensorInfo;
using boltrt::gguf::Value;
using boltrt::gguf::ValueType;
using json = nlohmann::ordered_json;  // keeps the file's key order

struct InspectArgs {
  std::string path;
  bool json = false;
  bool full = false;
  std::string tensor;
  int64_t values = 16;
};

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string human_count(uint64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.3f} B", n / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.3f} M", n / 1e6);
  if (n >= 1'000) return fmt::format("{:.3f} K", n / 1e3);
  return fmt::format("{}", n);
}

// Printable, single-line form of a string value: control bytes escaped, long ones cut.
std::string quote(const std::string& s, size_t limit) {
  std::string out = "\"";
  size_t shown = 0;
  for (char c : s) {
    if (shown >= limit) {
      out += fmt::format("\"... ({} bytes)", s.size());
      return out;
    }
    auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '"' || c == '\\') {
      out += '\\', out += c;
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
    ++shown;
  }
  return out + "\"";
}

std::string scalar_text(const Value& v) {
  if (const auto* s = v.as_string()) return quote(*s, 100);
  if (const auto* b = std::get_if<bool>(&v.data)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&v.data)) {
    // Shortest text that reads back to the stored value ("1e-06", not 9.99999997e-07).
    return v.type == ValueType::FLOAT32 ? fmt::format("{}", static_cast<float>(*d))
                                        : fmt::format("{}", *d);
  }
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return fmt::format("{}", *u);
  if (const auto* i = std::get_if<int64_t>(&v.data)) return fmt::format("{}", *i);
  return "?";
}

std::string value_text(const Value& v, bool full) {
  const Array* a = v.as_array();
  if (!a) return scalar_text(v);
  const size_t shown = full ? a->items.size() : std::min<size_t>(a->items.size(), 8);
  std::string out = "[";
  for (size_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    out += value_text(a->items[i], full);
  }
  if (shown < a->items.size()) out += fmt::format(", ... {} more", a->items.size() - shown);
  return out + "]";
}

std::string type_text(const Value& v) {
  if (const Array* a = v.as_array()) {
    return fmt::format("{}[{}]", type_text(a->items.empty() ? Value{a->type, {}} : a->items[0]),
                       a->items.size());
  }
  return std::string(boltrt::gguf::value_type_name(v.type));
}

json value_json(const Value& v, bool full) {
  if (const Array* a = v.as_array()) {
    json items = json::array();
    const size_t limit = full ? a->items.size() : 64;
    for (size_t i = 0; i < std::min(limit, a->items.size()); ++i) {
      items.push_back(value_json(a->items[i], full));
    }
    if (a->items.size() <= limit) return items;
    return json{{"element_type", boltrt::gguf::value_type_name(a->type)},
                {"count", a->items.size()},
                {"head", items}};
  }
  if (const auto* s = v.as_string()) return *s;
  if (const auto* b = std::get_if<bool>(&v.data)) return *b;
  if (const auto* d = std::get_if<double>(&v.data)) {
    // float32 values as their shortest decimal (1e-06), which reads back to the same float.
    return v.type == ValueType::FLOAT32 && std::isfinite(*d)
               ? std::stod(fmt::format("{}", static_cast<float>(*d)))
               : *d;
  }
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v.data)) return *i;
  return nullptr;
}

std::string shape_text(const TensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += fmt::format("{}{}", d ? ", " : "", t.ne[d]);
  return s + "]";
}

// One integer-or-array hyper-parameter as text: "42" or "array[35]: 6144..12288".
std::string hparam_text(const File& f, const std::string& key) {
  const Value* v = f.find(key);
  if (!v) return "";
  if (const Array* a = v->as_array()) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const Value& e : a->items) {
      if (auto x = e.as_int()) lo = std::min(lo, *x), hi = std::max(hi, *x);
    }
    if (a->items.empty() || lo > hi) return fmt::format("array[{}]", a->items.size());
    return lo == hi ? fmt::format("{} (array[{}])", lo, a->items.size())
                    : fmt::format("{}..{} (array[{}])", lo, hi, a->items.size());
  }
  return scalar_text(*v);
}

struct Summary {
  uint64_t params = 0, bytes = 0;
  struct PerType {
    uint64_t tensors = 0, params = 0, bytes = 0;
  };
  std::map<std::string, PerType> by_type;
};

Summary summarize(const File& f) {
  Summary s;
  for (const TensorInfo& t : f.tensors()) {
    auto n = static_cast<uint64_t>(t.n_elements());
    s.params += n;
    s.bytes += t.nbytes;
    auto& p = s.by_type[std::string(boltrt::type_traits(t.type).name)];
    ++p.tensors;
    p.params += n;
    p.bytes += t.nbytes;
  }
  return s;
}

int64_t vocab_size(const File& f) {
  if (const Value* v = f.find("tokenizer.ggml.tokens")) {
    if (const Array* a = v->as_array()) return static_cast<int64_t>(a->items.size());
  }
  return 0;
}

std::vector<float> tensor_values(const File& f, const TensorInfo& t, int64_t count) {
  const auto& tr = boltrt::type_traits(t.type);
  if (!tr.computable) {
    boltrt::fail("{}: tensor '{}' has type {}, which boltrt cannot dequantize", f.path(), t.name,
                 tr.name);
  }
  count = std::min(count, t.n_elements());
  std::vector<float> out;
  std::vector<float> row(static_cast<size_t>(t.ne[0]));
  const size_t rs = boltrt::row_size(t.type, t.ne[0]);
  for (int64_t r = 0; static_cast<int64_t>(out.size()) < count; ++r) {
    boltrt::dequantize_row(t.type, f.tensor_data(t) + r * rs, row.data(), t.ne[0]);
    for (int64_t i = 0; i < t.ne[0] && static_cast<int64_t>(out.size()) < count; ++i) {
      out.push_back(row[i]);
    }
  }
  return out;
}

void print_json(const File& f, const InspectArgs& args) {
  json j;
  j["file"] = f.path();
  j["version"] = f.version();
  j["file_size"] = f.file_size();
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  j["architecture"] = f.architecture();
  j["warnings"] = f.warnings();
  json meta = json::object();
  for (const auto& kv : f.metadata()) meta[kv.key] = value_json(kv.value, args.full);
  j["metadata"] = meta;
  json tensors = json::array();
  for (const TensorInfo& t : f.tensors()) {
    std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
    tensors.push_back({{"name", t.name},
                       {"type", boltrt::type_traits(t.type).name},
                       {"shape", shape},
                       {"bytes", t.nbytes},
                       {"offset", t.offset}});
  }
  j["tensors"] = tensors;
  Summary s = summarize(f);
  json by_type = json::object();
  for (const auto& [name, p] : s.by_type) {
    by_type[name] = {{"tensors", p.tensors}, {"params", p.params}, {"bytes", p.bytes}};
  }
  j["summary"] = {{"tensors", f.tensors().size()},
                  {"params", s.params},
                  {"tensor_bytes", s.bytes},
                  {"by_type", by_type}};
  if (!args.tensor.empty()) {
    const TensorInfo* t = f.find_tensor(args.tensor);
    if (!t) boltrt::fail("{}: no tensor named '{}'", f.path(), args.tensor);
    j["values"] = tensor_values(f, *t, args.values);
  }
  fmt::print("{}\n", j.dump(1, ' ', false, json::error_handler_t::replace));
}

void print_text(const File& f, const InspectArgs& args) {
  if (!args.tensor.empty()) {
    const TensorInfo* t = f.find_tensor(args.tensor);
    if (!t) boltrt::fail("{}: no tensor named '{}'", f.path(), args.tensor);
    fmt::print("{}: {} {} ({} bytes at data offset {})\n", t->name,
               boltrt::type_traits(t->type).name, shape_text(*t), t->nbytes, t->offset);
    auto values = tensor_values(f, *t, args.values);
    for (size_t i = 0; i < values.size(); ++i) {
      fmt::print("{}{:.6g}", i % 8 ? " " : (i ? "\n" : ""), values[i]);
    }
    fmt::print("\n");
    return;
  }
  const std::string arch = f.architecture();
  fmt::print("file:           {}\n", f.path());
  fmt::print("format:         GGUF v{}, {}, alignment {}, tensor data at byte {}\n", f.version(),
             human_bytes(f.file_size()), f.alignment(), f.data_offset());
  fmt::print("architecture:   {}\n", arch.empty() ? "(none)" : arch);
  if (auto name = f.find("general.name"); name && name->as_string()) {
    fmt::print("name:           {}\n", *name->as_string());
  }
  if (!arch.empty()) {
    const std::pair<const char*, const char*> keys[] = {
        {"layers", "block_count"},
        {"embedding", "embedding_length"},
        {"context", "context_length"},
        {"heads", "attention.head_count"},
        {"kv heads", "attention.head_count_kv"},
        {"head dim", "attention.key_length"},
        {"head dim swa", "attention.key_length_swa"},
        {"ffn", "feed_forward_length"},
        {"experts", "expert_count"},
        {"experts used", "expert_used_count"},
        {"expert ffn", "expert_feed_forward_length"},
        {"sliding window", "attention.sliding_window"},
        {"shared kv", "attention.shared_kv_layers"},
        {"per-layer emb", "embedding_length_per_layer_input"},
    };
    for (const auto& [label, key] : keys) {
      std::string v = hparam_text(f, arch + "." + key);
      if (!v.empty()) fmt::print("{:<16}{}\n", std::string(label) + ":", v);
    }
  }
  if (int64_t v = vocab_size(f)) fmt::print("{:<16}{}\n", "vocab:", v);

  fmt::print("\nmetadata ({} keys):\n", f.metadata().size());
  size_t key_width = 0;
  for (const auto& kv : f.metadata()) key_width = std::max(key_width, kv.key.size());
  for (const auto& kv : f.metadata()) {
    fmt::print("  {:<{}}  {:<14} {}\n", kv.key, key_width, type_text(kv.value),
               value_text(kv.value, args.full));
  }

  fmt::print("\ntensors ({}):\n", f.tensors().size());
  if (!f.tensors().empty()) {
    size_t name_width = 4;
    for (const TensorInfo& t : f.tensors()) name_width = std::max(name_width, t.name.size());
    fmt::print("  {:<{}}  {:<8} {:<24} {:>14} {:>14}\n", "name", name_width, "type", "shape",
               "bytes", "offset");
    for (const TensorInfo& t : f.tensors()) {
      fmt::print("  {:<{}}  {:<8} {:<24} {:>14} {:>14}\n", t.name, name_width,
                 boltrt::type_traits(t.type).name, shape_text(t), t.nbytes, t.offset);
    }
  }
  Summary s = summarize(f);
  fmt::print("\ntotals by type:\n");
  for (const auto& [name, p] : s.by_type) {
    fmt::print("  {:<8} {:>6} tensors {:>12} params {:>12}\n", name, p.tensors,
               human_count(p.params), human_bytes(p.bytes));
  }
  for (const std::string& w : f.warnings()) fmt::print("warning:        {}\n", w);
  fmt::print("parameters:     {} ({})\n", human_count(s.params), s.params);
  fmt::print("tensor bytes:   {} ({})\n", human_bytes(s.bytes), s.bytes);
}

void setup(CLI::App& sub) {
  auto args = std::make_shared<InspectArgs>();
  sub.add_option("file", args->path, "GGUF file")->required();
  sub.add_flag("--json", args->json, "Machine-readable JSON output");
  sub.add_flag("--full", args->full, "Print arrays in full (not abbreviated)");
  sub.add_option("--tensor", args->tensor, "Dump one tensor's values");
  sub.add_option("--values", args->values, "How many values --tensor prints")
      ->capture_default_str();
  sub.callback([args] {
    if (args->values < 0) boltrt::fail("--values must be >= 0");
    auto f = File::open(args->path);
    if (args->json) {
      print_json(*f, *args);
    } else {
      print_text(*f, *args);
    }
  });
}

}  // namespace

BOLTRT_COMMAND(inspect, "Print a GGUF file's metadata, tensors and totals", setup);
