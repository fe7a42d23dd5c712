// Golden maker for Qwen3.5 output parsing (and a cross-check of the prompt rendering) with
// llama.cpp's own chat code: the Qwen3.5 template given on the command line overrides the
// vocabulary's, common_chat_templates_apply renders each case of cases.json, and
// common_chat_parse (reasoning_format = deepseek) splits each model output of outputs.json.
// NOT built by CMake; it links libllama-common from ~/.cache/llama-ref. See ../README.md.
//
//   golden_parse VOCAB.gguf TEMPLATE.jinja cases.json outputs.json tools.json > parse.golden.json
// (outputs name their tool set in tools.json).
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
  return common_json(s).dump();
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s VOCAB.gguf TEMPLATE.jinja cases.json outputs.json tools.json\n",
            argv[0]);
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  auto tmpls = common_chat_templates_init(model, read_file(argv[2]));
  const common_json cases = common_json::parse(read_file(argv[3]));
  const common_json outs = common_json::parse(read_file(argv[4]));
  const common_json tool_sets = common_json::parse(read_file(argv[5]));

  printf("{\n \"render\": {\n");
  for (size_t i = 0; i < cases.size(); ++i) {
    const common_json& c = cases.at(i);
    std::string fields;
    try {
      common_chat_templates_inputs in;
      in.messages = common_chat_msgs_parse_oaicompat(c.at("messages"));
      if (c.contains("tools")) in.tools = common_chat_tools_parse_oaicompat(c.at("tools"));
      in.add_generation_prompt = c.value("add_generation_prompt", true);
      in.enable_thinking = c.value("enable_thinking", true);
      in.use_jinja = true;
      in.parallel_tool_calls = true;
      in.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
      const auto params = common_chat_templates_apply(tmpls.get(), in);
      fields = "\"prompt\": " + quote(params.prompt) +
               ", \"generation_prompt\": " + quote(params.generation_prompt);
    } catch (const std::exception& e) {
      fields = "\"error\": " + quote(e.what());
    }
    printf("  %s: {%s}%s\n", quote(c.at("name").get<std::string>()).c_str(), fields.c_str(),
           i + 1 < cases.size() ? "," : "");
  }
  printf(" },\n \"parse\": {\n");
  for (size_t i = 0; i < outs.size(); ++i) {
    const common_json& o = outs.at(i);
    common_chat_templates_inputs in;
    in.messages = common_chat_msgs_parse_oaicompat(
        common_json::parse(R"([{"role": "user", "content": "x"}])"));
    if (o.contains("tools")) {
      in.tools = common_chat_tools_parse_oaicompat(tool_sets.at(o.at("tools").get<std::string>()));
    }
    in.add_generation_prompt = true;
    in.enable_thinking = o.value("enable_thinking", true);
    in.use_jinja = true;
    in.parallel_tool_calls = o.value("parallel_tool_calls", true);
    in.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
    const auto params = common_chat_templates_apply(tmpls.get(), in);
    common_chat_parser_params pp(params);
    pp.reasoning_format = COMMON_REASONING_FORMAT_DEEPSEEK;
    pp.parse_tool_calls = true;
    pp.parser.load(params.parser);
    std::string fields;
    try {
      const common_chat_msg msg = common_chat_parse(o.at("output").get<std::string>(), false, pp);
      fields = "\"reasoning_content\": " + quote(msg.reasoning_content) +
               ", \"content\": " + quote(msg.content) + ", \"tool_calls\": [";
      for (size_t k = 0; k < msg.tool_calls.size(); ++k) {
        fields += std::string(k ? ", " : "") + "{\"name\": " + quote(msg.tool_calls[k].name) +
                  ", \"arguments\": " + quote(msg.tool_calls[k].arguments) + "}";
      }
      fields += "]";
    } catch (const std::exception& e) {
      fields = "\"error\": " + quote(e.what());
    }
    printf("  %s: {\"generation_prompt\": %s, %s}%s\n",
           quote(o.at("name").get<std::string>()).c_str(), quote(params.generation_prompt).c_str(),
           fields.c_str(), i + 1 < outs.size() ? "," : "");
  }
  printf(" }\n}\n");
  llama_model_free(model);
  return 0;
}
