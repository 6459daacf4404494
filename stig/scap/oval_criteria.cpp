#include "stig/scap/oval_criteria.h"

#include <fmt/format.h>

#include "stig/scap/oscap_api.h"

namespace temper::stig {

namespace {

// OVAL forbids cycles, but content is untrusted.
constexpr int kMaxDepth = 16;

std::string Operation(oval_operation_t op) {
  switch (op) {
    case OVAL_OPERATION_EQUALS:
      return "=";
    case OVAL_OPERATION_NOT_EQUAL:
      return "!=";
    case OVAL_OPERATION_CASE_INSENSITIVE_EQUALS:
      return "= (ignoring case)";
    case OVAL_OPERATION_CASE_INSENSITIVE_NOT_EQUAL:
      return "!= (ignoring case)";
    case OVAL_OPERATION_GREATER_THAN:
      return ">";
    case OVAL_OPERATION_LESS_THAN:
      return "<";
    case OVAL_OPERATION_GREATER_THAN_OR_EQUAL:
      return ">=";
    case OVAL_OPERATION_LESS_THAN_OR_EQUAL:
      return "<=";
    case OVAL_OPERATION_PATTERN_MATCH:
      return "matches the regex";
    default:
      return OscapText(oval_operation_get_text(op));
  }
}

// Where a variable's value comes from, and the value when the content fixes it.
std::string VariableText(struct oval_variable* v) {
  if (!v) return "a variable that is missing";
  const std::string id = OscapText(oval_variable_get_id(v));
  switch (oval_variable_get_type(v)) {
    case OVAL_VARIABLE_CONSTANT: {
      std::string values;
      struct oval_value_iterator* it = oval_variable_get_values(v);
      while (it && oval_value_iterator_has_more(it)) {
        values += (values.empty() ? "" : ", ") + OscapText(oval_value_get_text(oval_value_iterator_next(it)));
      }
      if (it) oval_value_iterator_free(it);
      return fmt::format("{} (variable {})", values, id);
    }
    case OVAL_VARIABLE_EXTERNAL:
      return fmt::format("the rule's XCCDF value (variable {})", id);
    default:
      return fmt::format("a value computed from the system (variable {})", id);
  }
}

// "filepath matches the regex ^/etc/profile\.d/.*$", "subexpression <= 900 (int)".
std::string EntityText(struct oval_entity* e, const std::string& field) {
  const std::string name = field.empty() ? OscapText(oval_entity_get_name(e)) : field;
  std::string value;
  if (oval_entity_get_varref_type(e) != OVAL_ENTITY_VARREF_NONE) {
    value = VariableText(oval_entity_get_variable(e));
  } else if (struct oval_value* v = oval_entity_get_value(e)) {
    value = OscapText(oval_value_get_text(v));
  } else {
    return name + " nil" + (name == "filename" ? " (the directory itself)" : "");
  }
  const oval_datatype_t type = oval_entity_get_datatype(e);
  const std::string datatype = type == OVAL_DATATYPE_STRING || type == OVAL_DATATYPE_UNKNOWN
                                   ? ""
                                   : " (" + OscapText(oval_datatype_get_text(type)) + ")";
  return fmt::format("{} {} {}{}", name, Operation(oval_entity_get_operation(e)), value, datatype);
}

class Writer {
 public:
  explicit Writer(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  void Criteria(struct oval_criteria_node* node, int indent, int depth);
  std::string Take() { return std::move(out_); }

 private:
  void Line(int indent, const std::string& text);
  void Test(struct oval_test* test, bool negate, int indent);
  std::string StateText(struct oval_state* state);

  std::size_t max_bytes_;
  std::string out_;
  bool full_ = false;
};

void Writer::Line(int indent, const std::string& text) {
  if (full_) return;
  std::string line = std::string(2 * static_cast<std::size_t>(indent), ' ') + text + "\n";
  if (out_.size() + line.size() > max_bytes_) {
    out_ += fmt::format("[… the rest of the check is left out: it runs past {} bytes]\n", max_bytes_);
    full_ = true;
    return;
  }
  out_ += line;
}

std::string Writer::StateText(struct oval_state* state) {
  std::string out;
  struct oval_state_content_iterator* it = state ? oval_state_get_contents(state) : nullptr;
  while (it && oval_state_content_iterator_has_more(it)) {
    struct oval_state_content* c = oval_state_content_iterator_next(it);
    struct oval_entity* e = oval_state_content_get_entity(c);
    if (e) out += (out.empty() ? "" : "; ") + EntityText(e, "");
  }
  if (it) oval_state_content_iterator_free(it);
  return out.empty() ? "(no constraints)" : out;
}

void Writer::Test(struct oval_test* test, bool negate, int indent) {
  if (!test) return Line(indent, "- a test that is missing");
  struct oval_object* object = oval_test_get_object(test);
  const std::string type = object ? OscapText(oval_subtype_get_text(oval_object_get_subtype(object))) : "unknown";
  const std::string comment = OscapText(oval_test_get_comment(test));
  Line(indent, fmt::format("- {}{} test{}", negate ? "NOT: " : "", type, comment.empty() ? "" : ": " + comment));
  if (!object) return Line(indent + 2, "object: missing");
  std::string what;
  struct oval_object_content_iterator* contents = oval_object_get_object_contents(object);
  while (contents && oval_object_content_iterator_has_more(contents)) {
    struct oval_object_content* c = oval_object_content_iterator_next(contents);
    std::string part;
    switch (oval_object_content_get_type(c)) {
      case OVAL_OBJECTCONTENT_ENTITY:
        part = EntityText(oval_object_content_get_entity(c), OscapText(oval_object_content_get_field_name(c)));
        break;
      case OVAL_OBJECTCONTENT_FILTER: {
        struct oval_filter* f = oval_object_content_get_filter(c);
        part = fmt::format("{} items whose {}",
                           f && oval_filter_get_filter_action(f) == OVAL_FILTER_ACTION_INCLUDE ? "only" : "leaving out",
                           StateText(f ? oval_filter_get_state(f) : nullptr));
        break;
      }
      default:
        part = "items of a set of other objects";
    }
    what += (what.empty() ? "" : "; ") + part;
  }
  if (contents) oval_object_content_iterator_free(contents);
  struct oval_behavior_iterator* behaviors = oval_object_get_behaviors(object);
  while (behaviors && oval_behavior_iterator_has_more(behaviors)) {
    struct oval_behavior* b = oval_behavior_iterator_next(behaviors);
    what += fmt::format("{}{} {}", what.empty() ? "" : "; ", OscapText(oval_behavior_get_key(b)),
                        OscapText(oval_behavior_get_value(b)));
  }
  if (behaviors) oval_behavior_iterator_free(behaviors);
  Line(indent + 2, "looks at: " + (what.empty() ? "(the whole system)" : what));
  Line(indent + 2, fmt::format("existence: {}; items checked: {}",
                               OscapText(oval_existence_get_text(oval_test_get_existence(test))),
                               OscapText(oval_check_get_text(oval_test_get_check(test)))));
  struct oval_state_iterator* states = oval_test_get_states(test);
  while (states && oval_state_iterator_has_more(states)) {
    Line(indent + 2, "each item must have: " + StateText(oval_state_iterator_next(states)));
  }
  if (states) oval_state_iterator_free(states);
}

void Writer::Criteria(struct oval_criteria_node* node, int indent, int depth) {
  if (!node) return Line(indent, "- (no criteria)");
  if (depth > kMaxDepth) return Line(indent, fmt::format("- [criteria nested more than {} deep left out]", kMaxDepth));
  const bool negate = oval_criteria_node_get_negate(node);
  switch (oval_criteria_node_get_type(node)) {
    case OVAL_NODETYPE_CRITERIA: {
      const char* how = "ALL of";
      switch (oval_criteria_node_get_operator(node)) {
        case OVAL_OPERATOR_OR:
          how = "ANY of";
          break;
        case OVAL_OPERATOR_ONE:
          how = "exactly ONE of";
          break;
        case OVAL_OPERATOR_XOR:
          how = "an odd number of";
          break;
        default:
          break;
      }
      Line(indent, fmt::format("- {}{}:", negate ? "NOT " : "", how));
      struct oval_criteria_node_iterator* it = oval_criteria_node_get_subnodes(node);
      while (it && oval_criteria_node_iterator_has_more(it))
        Criteria(oval_criteria_node_iterator_next(it), indent + 1, depth + 1);
      if (it) oval_criteria_node_iterator_free(it);
      return;
    }
    case OVAL_NODETYPE_CRITERION:
      return Test(oval_criteria_node_get_test(node), negate, indent);
    case OVAL_NODETYPE_EXTENDDEF: {
      struct oval_definition* def = oval_criteria_node_get_definition(node);
      if (!def) return Line(indent, "- an extended definition that is missing");
      Line(indent,
           fmt::format("- {}the check \"{}\":", negate ? "NOT " : "", OscapText(oval_definition_get_title(def))));
      return Criteria(oval_definition_get_criteria(def), indent + 1, depth + 1);
    }
    default:
      return Line(indent, "- a criteria node of unknown type");
  }
}

}  // namespace

std::string OvalCriteriaText(struct oval_definition* definition, std::size_t max_bytes) {
  Writer w(max_bytes);
  w.Criteria(definition ? oval_definition_get_criteria(definition) : nullptr, 0, 0);
  return w.Take();
}

}  // namespace temper::stig
