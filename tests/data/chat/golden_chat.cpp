// Golden maker for boltrt's chat-template tests. NOT built by CMake; links llama.cpp's
// libllama-common (its Jinja engine and Gemma 4 chat handler). Build and run: see README.md.
//
//   golden_chat VOCAB.gguf conversations.json outputs.json > chat.golden.json
//
// Renders every conversation with the GGUF's own tokenizer.chat_template exactly as llama.cpp
// does (common_chat_templates_apply, use_jinja), and parses every model output with the
// parser that llama.cpp builds for that prompt (common_chat_parse, reasoning_format=deepseek).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "chat.h"
#include "json.h"
#include "llama.h"

static std::string read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

static std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char b[8];
          snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

static common_chat_templates_inputs make_inputs(const common_json& c) {
  common_chat_templates_inputs in;
  in.messages = common_chat_msgs_parse_oaicompat(c.at("messages"));
  if (c.contains("tools")) in.tools = common_chat_tools_parse_oaicompat(c.at("tools"));
  in.add_generation_prompt =
      c.contains("add_generation_prompt") ? c.at("add_generation_prompt").get<bool>() : true;
  in.enable_thinking = c.contains("enable_thinking") ? c.at("enable_thinking").get<bool>() : false;
  in.use_jinja = true;
  in.parallel_tool_calls = true;
  in.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
  return in;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s VOCAB.gguf conversations.json outputs.json\n", argv[0]);
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  auto tmpls = common_chat_templates_init(model, "");
  const common_json convs = common_json::parse(read_file(argv[2]));
  const common_json outs = common_json::parse(read_file(argv[3]));

  const std::string src = common_chat_templates_source(tmpls.get());
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : src) h = (h ^ ch) * 0x100000001b3ull;
  printf("{\n \"template_chars\": %zu,\n \"template_fnv64\": \"%016llx\",\n \"render\": [\n",
         src.size(), (unsigned long long)h);
  for (size_t i = 0; i < convs.size(); ++i) {
    const common_json& c = convs.at(i);
    std::string fields;
    try {
      const auto params = common_chat_templates_apply(tmpls.get(), make_inputs(c));
      fields = "\"prompt\": " + quote(params.prompt) +
               ", \"generation_prompt\": " + quote(params.generation_prompt);
    } catch (const std::exception& e) {  // llama.cpp cannot render it; recorded, not compared
      fields = "\"error\": " + quote(e.what());
    }
    printf("  {\"name\": %s, %s}%s\n", quote(c.at("name").get<std::string>()).c_str(),
           fields.c_str(), i + 1 < convs.size() ? "," : "");
  }
  printf(" ],\n \"parse\": [\n");
  for (size_t i = 0; i < outs.size(); ++i) {
    const common_json& o = outs.at(i);
    common_json c = o;
    c["messages"] = common_json::parse("[{\"role\": \"user\", \"content\": \"x\"}]");
    const auto params = common_chat_templates_apply(tmpls.get(), make_inputs(c));
    common_chat_parser_params pp(params);
    pp.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
    pp.parser.load(params.parser);
    const common_chat_msg msg = common_chat_parse(o.at("output").get<std::string>(), false, pp);
    printf(
        "  {\"name\": %s, \"generation_prompt\": %s, \"reasoning_content\": %s, \"content\": %s, "
        "\"tool_calls\": [",
        quote(o.at("name").get<std::string>()).c_str(), quote(params.generation_prompt).c_str(),
        quote(msg.reasoning_content).c_str(), quote(msg.content).c_str());
    for (size_t k = 0; k < msg.tool_calls.size(); ++k) {
      printf("%s{\"name\": %s, \"arguments\": %s}", k ? ", " : "",
             quote(msg.tool_calls[k].name).c_str(), quote(msg.tool_calls[k].arguments).c_str());
    }
    printf("]}%s\n", i + 1 < outs.size() ? "," : "");
  }
  printf(" ]\n}\n");
  llama_model_free(model);
  return 0;
}
