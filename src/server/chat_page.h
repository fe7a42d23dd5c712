// The chat page `boltrt serve` answers at GET /: one self-contained HTML document (style and
// script inline, nothing fetched from elsewhere) that talks to /v1/chat/completions with
// streaming, shows the thinking collapsed and tool calls as they arrive, and can stop an answer.
#pragma once
#include <string_view>

namespace boltrt::server {

std::string_view chat_page_html();

}  // namespace boltrt::server
