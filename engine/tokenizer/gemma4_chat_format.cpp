#include "engine/tokenizer/gemma4_chat_format.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>
#include <utility>

#include <fmt/format.h>

namespace temper::engine {
namespace {

using json = nlohmann::json;

constexpr std::string_view kWhitespace = " \t\n\r\f\v";

std::string_view Trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(kWhitespace);
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(kWhitespace);
  return s.substr(begin, end - begin + 1);
}

bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.'; }

const char* RoleName(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem:
      return "system";
    case ChatRole::kUser:
      return "user";
    case ChatRole::kModel:
      return "model";
  }
  return "user";
}

// Jinja truthiness: null, false, 0, "", [] and {} are false.
bool Truthy(const json* v) {
  if (v == nullptr || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_number()) return v->get<double>() != 0.0;
  if (v->is_string() || v->is_array() || v->is_object()) return !v->empty();
  return true;
}

const json* Get(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

// How Jinja prints a value with {{ v }}: strings as they are, the rest as JSON.
std::string ToText(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Jinja's dictsort: by key, case-insensitively.
std::vector<std::pair<const std::string*, const json*>> DictSort(const json& obj) {
  std::vector<std::pair<const std::string*, const json*>> items;
  for (auto it = obj.begin(); it != obj.end(); ++it) items.emplace_back(&it.key(), &it.value());
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return std::lexicographical_compare(
        a.first->begin(), a.first->end(), b.first->begin(), b.first->end(), [](char x, char y) {
          return std::tolower(static_cast<unsigned char>(x)) < std::tolower(static_cast<unsigned char>(y));
        });
  });
  return items;
}

// The template's strip_thinking: drops <|channel>...<channel|> spans from a model message.
std::string StripThinking(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t close = text.find("<channel|>", pos);
    std::string_view part = text.substr(pos, close == std::string_view::npos ? std::string_view::npos : close - pos);
    out.append(part.substr(0, part.find("<|channel>")));
    if (close == std::string_view::npos) break;
    pos = close + std::string_view("<channel|>").size();
  }
  return std::string(Trim(out));
}

}  // namespace

// Accumulates the prompt as text and as ids. Control tokens go in by id; the text between them is
// encoded with special-token matching off (see the header).
class Gemma4ChatFormat::Builder {
 public:
  explicit Builder(const Gemma4ChatFormat& format) : format_(format) {}

  void Control(Token t) {
    FlushText();
    prompt_.ids.push_back(format_.ids_[t]);
    prompt_.text += kTokenText[t];
  }
  void Text(std::string_view s) {
    pending_ += s;
    prompt_.text += s;
  }
  void Quoted(std::string_view s) {
    Control(kQuote);
    Text(s);
    Control(kQuote);
  }

  RenderedPrompt Finish() {
    FlushText();
    return std::move(prompt_);
  }

  // Marks a message boundary at the current end (see RenderedPrompt::message_ends). Callers mark
  // only where the next thing rendered is a control token or the end, so flushing here encodes the
  // pending text exactly as the next Control() would.
  void MessageEnd() {
    FlushText();
    const auto at = static_cast<int64_t>(prompt_.ids.size());
    if (prompt_.message_ends.empty() || prompt_.message_ends.back() < at) prompt_.message_ends.push_back(at);
  }

  // The template's format_argument.
  void Argument(const json& v, bool escape_keys) {
    if (v.is_string()) {
      Quoted(v.get_ref<const std::string&>());
    } else if (v.is_boolean()) {
      Text(v.get<bool>() ? "true" : "false");
    } else if (v.is_object()) {
      Text("{");
      bool first = true;
      for (const auto& [key, value] : DictSort(v)) {
        if (!first) Text(",");
        first = false;
        if (escape_keys) {
          Quoted(*key);
        } else {
          Text(*key);
        }
        Text(":");
        Argument(*value, escape_keys);
      }
      Text("}");
    } else if (v.is_array()) {
      Text("[");
      for (size_t i = 0; i < v.size(); ++i) {
        if (i > 0) Text(",");
        Argument(v[i], escape_keys);
      }
      Text("]");
    } else {
      Text(v.dump());  // numbers, and null as "null"
    }
  }

  void QuotedList(const json& items) {
    if (!items.is_array()) return;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) Text(",");
      Quoted(ToText(items[i]));
    }
  }

  // The template's format_parameters: one schema property per key.
  Status Parameters(const json& properties, const std::string& field, int depth) {
    if (depth > 32) return Status::InvalidArgument(fmt::format("{}: schema nested too deeply", field));
    static constexpr std::string_view kStandardKeys[] = {"description", "type", "properties", "required", "nullable"};
    bool first = true;
    for (const auto& [key, value] : DictSort(properties)) {
      if (std::find(std::begin(kStandardKeys), std::end(kStandardKeys), *key) != std::end(kStandardKeys)) continue;
      const std::string here = fmt::format("{}.{}", field, *key);
      if (!value->is_object()) return Status::InvalidArgument(fmt::format("{}: expected a schema object", here));
      if (!first) Text(",");
      first = false;
      Text(*key);
      Text(":{");
      bool add_comma = false;
      auto comma = [&] {
        if (add_comma) Text(",");
        add_comma = true;
      };
      if (const json* d = Get(*value, "description"); Truthy(d)) {
        Text("description:");
        Quoted(ToText(*d));
        add_comma = true;
      }
      if (Truthy(Get(*value, "nullable"))) {
        comma();
        Text("nullable:true");
      }
      const json* type = Get(*value, "type");
      if (type == nullptr || (type->is_array() && type->empty())) {
        return Status::InvalidArgument(fmt::format("{}: missing \"type\"", here));
      }
      const std::string value_type = Upper(ToText(type->is_array() ? (*type)[0] : *type));
      if (value_type == "STRING") {
        if (const json* e = Get(*value, "enum"); Truthy(e)) {
          comma();
          Text("enum:");
          Argument(*e, true);
        }
      } else if (value_type == "OBJECT") {
        Text(",properties:{");
        const json* props = Get(*value, "properties");
        TEMPER_RETURN_IF_ERROR(props != nullptr && props->is_object() ? Parameters(*props, here, depth + 1)
                                                                      : Parameters(*value, here, depth + 1));
        Text("}");
        if (const json* r = Get(*value, "required"); Truthy(r)) {
          Text(",required:[");
          QuotedList(*r);
          Text("]");
        }
      } else if (value_type == "ARRAY") {
        if (const json* items = Get(*value, "items"); items != nullptr && items->is_object() && !items->empty()) {
          Text(",items:{");
          bool first_item = true;
          for (const auto& [item_key, item_value] : DictSort(*items)) {
            if (item_value->is_null()) continue;
            if (!first_item) Text(",");
            first_item = false;
            if (*item_key == "properties") {
              Text("properties:{");
              if (item_value->is_object()) TEMPER_RETURN_IF_ERROR(Parameters(*item_value, here + ".items", depth + 1));
              Text("}");
            } else if (*item_key == "required") {
              Text("required:[");
              QuotedList(*item_value);
              Text("]");
            } else if (*item_key == "type") {
              Text("type:");
              if (item_value->is_array()) {
                json upper = json::array();
                for (const json& t : *item_value) upper.push_back(Upper(ToText(t)));
                Argument(upper, true);
              } else {
                Argument(json(Upper(ToText(*item_value))), true);
              }
            } else {
              Text(*item_key);
              Text(":");
              Argument(*item_value, true);
            }
          }
          Text("}");
        }
      }
      comma();
      Text("type:");
      Quoted(value_type);
      Text("}");
    }
    return Status::OK();
  }

  // The template's format_function_declaration.
  Status Declaration(const ToolDeclaration& tool, const std::string& field) {
    Text("declaration:");
    Text(tool.name);
    Text("{description:");
    Quoted(tool.description);
    const json& params = tool.parameters;
    if (Truthy(&params)) {
      Text(",parameters:{");
      if (const json* props = Get(params, "properties"); Truthy(props)) {
        if (!props->is_object())
          return Status::InvalidArgument(fmt::format("{}.parameters.properties: expected an object", field));
        Text("properties:{");
        TEMPER_RETURN_IF_ERROR(Parameters(*props, field + ".parameters.properties", 0));
        Text("},");
      }
      if (const json* r = Get(params, "required"); Truthy(r)) {
        Text("required:[");
        QuotedList(*r);
        Text("],");
      }
      if (const json* t = Get(params, "type"); Truthy(t)) {
        Text("type:");
        Quoted(Upper(ToText(*t)));
      }
      Text("}");
    }
    Text("}");
    return Status::OK();
  }

 private:
  void FlushText() {
    if (pending_.empty()) return;
    std::vector<int32_t> ids = format_.tokenizer_->Encode(pending_, EncodeOptions{.match_special_tokens = false});
    prompt_.ids.insert(prompt_.ids.end(), ids.begin(), ids.end());
    pending_.clear();
  }

  const Gemma4ChatFormat& format_;
  RenderedPrompt prompt_;
  std::string pending_;  // text not yet encoded
};

Result<std::unique_ptr<Gemma4ChatFormat>> Gemma4ChatFormat::Create(const Tokenizer& tokenizer) {
  std::unique_ptr<Gemma4ChatFormat> format(new Gemma4ChatFormat(tokenizer));
  TEMPER_RETURN_IF_ERROR(LookUpControlTokens(tokenizer, format->kTokenText, "Gemma 4", format->ids_));
  return format;
}

Result<RenderedPrompt> Gemma4ChatFormat::Render(const Conversation& c) const {
  for (size_t i = 0; i < c.tools.size(); ++i) {
    const std::string field = fmt::format("tools[{}]", i);
    TEMPER_RETURN_IF_ERROR(CheckToolName(c.tools[i].name, field));
    if (!c.tools[i].parameters.is_null() && !c.tools[i].parameters.is_object()) {
      return Status::InvalidArgument(fmt::format("{}.parameters: expected a JSON Schema object or null", field));
    }
  }
  int last_user = -1;
  for (size_t i = 0; i < c.messages.size(); ++i) {
    const ChatMessage& m = c.messages[i];
    const std::string field = fmt::format("messages[{}]", i);
    if (m.role == ChatRole::kUser) last_user = static_cast<int>(i);
    if (m.role != ChatRole::kModel && (!m.tool_calls.empty() || !m.tool_responses.empty() || !m.thinking.empty())) {
      return Status::InvalidArgument(fmt::format(
          "{} ({}): tool calls, tool responses and thinking belong to model messages", field, RoleName(m.role)));
    }
    for (size_t j = 0; j < m.tool_calls.size(); ++j) {
      const std::string call = fmt::format("{}.tool_calls[{}]", field, j);
      TEMPER_RETURN_IF_ERROR(CheckToolName(m.tool_calls[j].name, call));
      if (!m.tool_calls[j].arguments.is_object()) {
        return Status::InvalidArgument(fmt::format("{}: arguments must be a JSON object", call));
      }
    }
    for (size_t j = 0; j < m.tool_responses.size(); ++j) {
      TEMPER_RETURN_IF_ERROR(CheckToolName(m.tool_responses[j].name, fmt::format("{}.tool_responses[{}]", field, j)));
    }
  }

  Builder b(*this);
  b.Control(kBos);
  size_t start = 0;
  const bool first_is_system = !c.messages.empty() && c.messages[0].role == ChatRole::kSystem;
  if (c.enable_thinking || !c.tools.empty() || first_is_system) {
    b.Control(kTurnOpen);
    b.Text("system\n");
    if (c.enable_thinking) b.Control(kThink);
    if (first_is_system) {
      b.Text(Trim(c.messages[0].content));
      start = 1;
    }
    for (size_t i = 0; i < c.tools.size(); ++i) {
      b.Control(kToolOpen);
      TEMPER_RETURN_IF_ERROR(b.Declaration(c.tools[i], fmt::format("tools[{}]", i)));
      b.Control(kToolClose);
    }
    b.Control(kTurnClose);
    b.Text("\n");
    b.MessageEnd();
  }

  bool turn_open = false;  // a model turn that tool responses left open
  for (size_t i = start; i < c.messages.size(); ++i) {
    const ChatMessage& m = c.messages[i];
    const bool model = m.role == ChatRole::kModel;
    if (turn_open && !model) {
      b.Control(kTurnClose);
      b.Text("\n");
      b.MessageEnd();
      turn_open = false;
    }
    if (!turn_open) {
      b.Control(kTurnOpen);
      b.Text(RoleName(m.role));
      b.Text("\n");
    }
    if (model && !m.tool_calls.empty() && !m.thinking.empty() && static_cast<int>(i) > last_user) {
      b.Control(kChannelOpen);
      b.Text("thought\n");
      b.Text(m.thinking);
      b.Control(kChannelClose);
    }
    for (const ToolCall& call : m.tool_calls) {
      b.Control(kCallOpen);
      b.Text("call:");
      b.Text(call.name);
      b.Text("{");
      bool first = true;
      for (const auto& [key, value] : DictSort(call.arguments)) {
        if (!first) b.Text(",");
        first = false;
        b.Text(*key);
        b.Text(":");
        b.Argument(*value, /*escape_keys=*/false);
      }
      b.Text("}");
      b.Control(kCallClose);
    }
    for (const ToolResponse& response : m.tool_responses) {
      b.Control(kResponseOpen);
      b.Text("response:");
      b.Text(response.name);
      b.Text("{");
      if (response.response.is_object()) {
        bool first = true;
        for (const auto& [key, value] : DictSort(response.response)) {
          if (!first) b.Text(",");
          first = false;
          b.Text(*key);
          b.Text(":");
          b.Argument(*value, /*escape_keys=*/false);
        }
      } else {
        b.Text("value:");
        b.Argument(response.response, /*escape_keys=*/false);
      }
      b.Text("}");
      b.Control(kResponseClose);
    }
    const std::string content = model ? StripThinking(m.content) : std::string(Trim(m.content));
    b.Text(content);
    if (!m.tool_responses.empty() && content.empty()) {
      turn_open = true;  // the model continues this turn after reading the responses
    } else {
      b.Control(kTurnClose);
      b.Text("\n");
      turn_open = false;
    }
    b.MessageEnd();
  }

  if (c.add_generation_prompt) {
    if (!turn_open) {
      b.Control(kTurnOpen);
      b.Text("model\n");
    }
    if (!c.enable_thinking) {
      b.Control(kChannelOpen);
      b.Text("thought\n");
      b.Control(kChannelClose);
    }
  }
  return b.Finish();
}

std::vector<int32_t> Gemma4ChatFormat::stop_ids() const { return {ids_[kTurnClose], ids_[kResponseOpen], ids_[kEos]}; }

// Parses one reply. Offsets in errors are bytes into the reply text.
class Gemma4ChatFormat::ReplyParser {
 public:
  explicit ReplyParser(std::string_view text) : s_(text) {}

  Result<ModelReply> Parse() {
    ModelReply reply;
    std::string content;
    std::vector<std::string_view> thoughts;
    while (pos_ < s_.size()) {
      const size_t next = s_.find('<', pos_);
      if (next == std::string_view::npos) {
        content.append(s_.substr(pos_));
        break;
      }
      content.append(s_.substr(pos_, next - pos_));
      pos_ = next;
      if (At(kChannelOpen)) {
        const size_t open = pos_;
        pos_ += Len(kChannelOpen);
        const size_t close = s_.find(kTokenText[kChannelClose], pos_);
        if (close == std::string_view::npos) return Error(open, "thought channel not closed with <channel|>");
        std::string_view inner = s_.substr(pos_, close - pos_);
        if (inner.starts_with("thought")) inner.remove_prefix(std::string_view("thought").size());
        thoughts.push_back(Trim(inner));
        pos_ = close + Len(kChannelClose);
      } else if (At(kCallOpen)) {
        TEMPER_ASSIGN_OR_RETURN(ToolCall call, ParseCall(static_cast<int>(reply.tool_calls.size())));
        reply.tool_calls.push_back(std::move(call));
      } else if (const int stop = AtAny({kTurnClose, kEos, kResponseOpen}); stop >= 0) {
        const size_t end = pos_ + Len(static_cast<Token>(stop));
        if (!Trim(s_.substr(end)).empty()) return Error(end, "text after the end of the turn");
        break;
      } else if (const int stray = AtAny({kChannelClose, kCallClose, kTurnOpen, kResponseClose, kToolOpen, kToolClose});
                 stray >= 0) {
        return Error(pos_, fmt::format("unexpected {}", kTokenText[stray]));
      } else {
        content.push_back('<');
        ++pos_;
      }
    }
    reply.content = std::string(Trim(content));
    for (size_t i = 0; i < thoughts.size(); ++i) {
      if (thoughts[i].empty()) continue;
      if (!reply.thinking.empty()) reply.thinking += '\n';
      reply.thinking.append(thoughts[i]);
    }
    return reply;
  }

 private:
  static size_t Len(Token t) { return std::string_view(kTokenText[t]).size(); }
  bool At(Token t) const { return s_.substr(pos_).starts_with(kTokenText[t]); }
  int AtAny(std::initializer_list<Token> tokens) const {
    for (Token t : tokens) {
      if (At(t)) return t;
    }
    return -1;
  }

  Status Error(size_t at, std::string_view what) const {
    if (call_ >= 0) return Status::InvalidArgument(fmt::format("tool call {} at byte {}: {}", call_, at, what));
    return Status::InvalidArgument(fmt::format("reply at byte {}: {}", at, what));
  }

  void SkipSpace() {
    while (pos_ < end_ && kWhitespace.find(s_[pos_]) != std::string_view::npos) ++pos_;
  }
  bool AtQuote() const { return s_.substr(pos_, end_ - pos_).starts_with(kTokenText[kQuote]); }

  // <|tool_call>call:NAME{ARGS}<tool_call|>
  Result<ToolCall> ParseCall(int index) {
    call_ = index;
    const size_t open = pos_;
    pos_ += Len(kCallOpen);
    end_ = s_.find(kTokenText[kCallClose], pos_);
    if (end_ == std::string_view::npos) return Error(open, "not closed with <tool_call|>");
    ToolCall call;
    SkipSpace();
    if (!s_.substr(pos_, end_ - pos_).starts_with("call:")) return Error(pos_, "expected 'call:'");
    pos_ += 5;
    const size_t name_start = pos_;
    while (pos_ < end_ && IsNameChar(s_[pos_])) ++pos_;
    call.name = std::string(s_.substr(name_start, pos_ - name_start));
    if (call.name.empty()) return Error(pos_, "expected a function name after 'call:'");
    if (pos_ >= end_ || s_[pos_] != '{')
      return Error(pos_, fmt::format("expected '{{' after the function name '{}'", call.name));
    TEMPER_ASSIGN_OR_RETURN(call.arguments, ParseObject("", 0));
    SkipSpace();
    if (pos_ != end_) return Error(pos_, "unexpected text after the arguments");
    pos_ = end_ + Len(kCallClose);
    call_ = -1;
    end_ = s_.size();
    return call;
  }

  static std::string Join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
  }

  // At '{'. Keys are bare or <|"|>-quoted.
  Result<json> ParseObject(const std::string& path, int depth) {
    if (depth > 32) return Error(pos_, "arguments nested too deeply");
    ++pos_;
    json obj = json::object();
    SkipSpace();
    if (pos_ < end_ && s_[pos_] == '}') {
      ++pos_;
      return obj;
    }
    while (true) {
      SkipSpace();
      std::string key;
      if (AtQuote()) {
        pos_ += Len(kQuote);
        const size_t close = s_.find(kTokenText[kQuote], pos_);
        if (close == std::string_view::npos || close >= end_) return Error(pos_, "unterminated quoted argument name");
        key = std::string(s_.substr(pos_, close - pos_));
        pos_ = close + Len(kQuote);
      } else {
        const size_t start = pos_;
        while (pos_ < end_ && s_[pos_] != ':' && std::string_view(",{}[]<").find(s_[pos_]) == std::string_view::npos) {
          ++pos_;
        }
        key = std::string(Trim(s_.substr(start, pos_ - start)));
      }
      if (key.empty()) {
        return Error(pos_, path.empty() ? std::string("expected an argument name")
                                        : fmt::format("argument '{}': expected a member name", path));
      }
      const std::string field = Join(path, key);
      SkipSpace();
      if (pos_ >= end_ || s_[pos_] != ':') return Error(pos_, fmt::format("expected ':' after argument '{}'", field));
      ++pos_;
      TEMPER_ASSIGN_OR_RETURN(json value, ParseValue(field, depth));
      if (obj.contains(key)) return Error(pos_, fmt::format("argument '{}' appears twice", field));
      obj[key] = std::move(value);
      SkipSpace();
      if (pos_ < end_ && s_[pos_] == ',') {
        ++pos_;
        SkipSpace();
        if (pos_ < end_ && s_[pos_] == '}') {  // a trailing comma
          ++pos_;
          return obj;
        }
        continue;
      }
      if (pos_ < end_ && s_[pos_] == '}') {
        ++pos_;
        return obj;
      }
      return Error(pos_, fmt::format("expected ',' or '}}' after argument '{}'", field));
    }
  }

  Result<json> ParseArray(const std::string& field, int depth) {
    if (depth > 32) return Error(pos_, "arguments nested too deeply");
    ++pos_;
    json arr = json::array();
    SkipSpace();
    if (pos_ < end_ && s_[pos_] == ']') {
      ++pos_;
      return arr;
    }
    while (true) {
      TEMPER_ASSIGN_OR_RETURN(json value, ParseValue(fmt::format("{}[{}]", field, arr.size()), depth));
      arr.push_back(std::move(value));
      SkipSpace();
      if (pos_ < end_ && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < end_ && s_[pos_] == ']') {
        ++pos_;
        return arr;
      }
      return Error(pos_, fmt::format("argument '{}': expected ',' or ']'", field));
    }
  }

  Result<json> ParseValue(const std::string& field, int depth) {
    SkipSpace();
    if (pos_ >= end_) return Error(pos_, fmt::format("argument '{}': missing value", field));
    if (AtQuote()) {
      const size_t open = pos_;
      pos_ += Len(kQuote);
      const size_t close = s_.find(kTokenText[kQuote], pos_);
      if (close == std::string_view::npos || close >= end_) {
        return Error(open, fmt::format("argument '{}': unterminated string", field));
      }
      json value = std::string(s_.substr(pos_, close - pos_));
      pos_ = close + Len(kQuote);
      return value;
    }
    if (s_[pos_] == '{') return ParseObject(field, depth + 1);
    if (s_[pos_] == '[') return ParseArray(field, depth + 1);
    // A bare value (number, true, false, null) ends at a delimiter or whitespace.
    const size_t start = pos_;
    while (pos_ < end_ && std::string_view(",}]").find(s_[pos_]) == std::string_view::npos &&
           kWhitespace.find(s_[pos_]) == std::string_view::npos) {
      ++pos_;
    }
    const std::string_view bare = s_.substr(start, pos_ - start);
    if (bare.empty()) return Error(start, fmt::format("argument '{}': missing value", field));
    if (bare == "true") return json(true);
    if (bare == "false") return json(false);
    if (bare == "null" || bare == "None") return json(nullptr);
    const bool numeric_start =
        !bare.empty() &&
        (std::isdigit(static_cast<unsigned char>(bare[0])) != 0 ||
         (bare[0] == '-' && bare.size() > 1 && std::isdigit(static_cast<unsigned char>(bare[1])) != 0));
    if (numeric_start) {
      const char* first = bare.data();
      const char* last = bare.data() + bare.size();
      if (bare.find_first_of(".eE") == std::string_view::npos) {
        int64_t i;
        if (auto [p, ec] = std::from_chars(first, last, i); ec == std::errc() && p == last) return json(i);
      }
      double d;
      if (auto [p, ec] = std::from_chars(first, last, d); ec == std::errc() && p == last) return json(d);
    }
    return Error(start, fmt::format("argument '{}': bare value '{}' is not a number, true, false or null (strings "
                                    "need <|\"|> quotes)",
                                    field, bare.substr(0, 40)));
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t end_ = 0;  // inside a tool call: where its <tool_call|> starts
  int call_ = -1;   // the tool call being parsed, for errors
};

Result<ModelReply> Gemma4ChatFormat::ParseReplyText(std::string_view text) const { return ReplyParser(text).Parse(); }

}  // namespace temper::engine
