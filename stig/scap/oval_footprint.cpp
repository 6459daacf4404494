#include "stig/scap/oval_footprint.h"

#include <cstdlib>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>

namespace temper::stig {

namespace {

// Object types that read the file named by their filepath, or path + filename, entities.
const std::set<std::string_view> kFileObjectTypes = {"file",       "textfilecontent54", "textfilecontent",
                                                     "symlink",    "xmlfilecontent",    "filehash",
                                                     "filehash58", "filemd5",           "fileextendedattribute"};
// Object types whose answer is fixed on a host: they read no file a change could touch.
const std::set<std::string_view> kFixedObjectTypes = {"family", "uname", "environmentvariable",
                                                      "environmentvariable58"};

// What one object entity names, or why it cannot be tied to a string.
struct Entity {
  std::shared_ptr<const EntityMatch> match;  // null with `nil` or `untied`
  bool nil = false;                          // xsi:nil: for filename, the directory itself
  std::string untied;
};

Entity ReadEntity(struct oval_entity* entity) {
  Entity out;
  std::optional<std::string> text;
  if (oval_entity_get_varref_type(entity) == OVAL_ENTITY_VARREF_NONE) {
    struct oval_value* value = oval_entity_get_value(entity);
    if (!value) {
      out.nil = true;
      return out;
    }
    text = OscapText(oval_value_get_text(value));
  } else {
    // A path from a variable: tied only when the variable is a constant of exactly one value.
    struct oval_variable* variable = oval_entity_get_variable(entity);
    if (variable && oval_variable_get_type(variable) == OVAL_VARIABLE_CONSTANT) {
      struct oval_value_iterator* values = oval_variable_get_values(variable);
      if (values && oval_value_iterator_remaining(values) == 1) {
        text = OscapText(oval_value_get_text(oval_value_iterator_next(values)));
      }
      if (values) oval_value_iterator_free(values);
    }
    if (!text) {
      out.untied = "a path taken from a variable";
      return out;
    }
  }
  switch (oval_entity_get_operation(entity)) {
    case OVAL_OPERATION_EQUALS:
      out.match = std::make_shared<const EntityMatch>(EntityMatch::Equal(*text));
      break;
    case OVAL_OPERATION_PATTERN_MATCH:
      out.match = EntityMatch::Pattern(*text);
      if (!out.match) out.untied = fmt::format("a path pattern this library cannot compile ({})", *text);
      break;
    default:
      out.untied = fmt::format("a path compared by operation {}", static_cast<int>(oval_entity_get_operation(entity)));
  }
  return out;
}

// OVAL forbids cycles (definitions, variables), but content is untrusted: depth is capped.
constexpr int kMaxDepth = 32;

void Untie(CheckFootprint& out, std::string why) {
  out = {.tied = false, .untied_because = std::move(why), .paths = {}};
}

}  // namespace

const CheckFootprint& OvalFootprintReader::Read(struct oval_definition_model* model,
                                                struct oval_definition* definition) {
  model_ = model;
  return Read(definition, 0);
}

const CheckFootprint& OvalFootprintReader::Read(struct oval_definition* definition, int depth) {
  const std::string id = OscapText(oval_definition_get_id(definition));
  auto it = by_definition_.find(id);
  if (it != by_definition_.end()) return it->second;
  CheckFootprint footprint{.tied = true};
  AddCriteria(oval_definition_get_criteria(definition), footprint, depth + 1);
  return by_definition_[id] = std::move(footprint);
}

void OvalFootprintReader::AddCriteria(struct oval_criteria_node* node, CheckFootprint& out, int depth) {
  if (!node || !out.tied) return;
  if (depth > kMaxDepth) return Untie(out, fmt::format("definitions nested more than {} deep", kMaxDepth));
  switch (oval_criteria_node_get_type(node)) {
    case OVAL_NODETYPE_CRITERIA: {
      struct oval_criteria_node_iterator* it = oval_criteria_node_get_subnodes(node);
      while (it && oval_criteria_node_iterator_has_more(it))
        AddCriteria(oval_criteria_node_iterator_next(it), out, depth);
      if (it) oval_criteria_node_iterator_free(it);
      break;
    }
    case OVAL_NODETYPE_CRITERION:
      AddTest(oval_criteria_node_get_test(node), out, depth);
      break;
    case OVAL_NODETYPE_EXTENDDEF: {
      struct oval_definition* def = oval_criteria_node_get_definition(node);
      if (!def) return Untie(out, "an extended definition that is missing");
      const CheckFootprint& extended = Read(def, depth);
      if (!extended.tied) return Untie(out, extended.untied_because);
      out.paths.insert(out.paths.end(), extended.paths.begin(), extended.paths.end());
      break;
    }
    default:
      Untie(out, "a criteria node of unknown type");
  }
}

void OvalFootprintReader::AddTest(struct oval_test* test, CheckFootprint& out, int depth) {
  struct oval_object* object = test ? oval_test_get_object(test) : nullptr;
  if (!object) return Untie(out, "a test without an object");
  AddObject(object, out, depth);
  struct oval_state_iterator* states = oval_test_get_states(test);
  while (out.tied && states && oval_state_iterator_has_more(states)) {
    AddState(oval_state_iterator_next(states), out, depth);
  }
  if (states) oval_state_iterator_free(states);
}

void OvalFootprintReader::AddState(struct oval_state* state, CheckFootprint& out, int depth) {
  struct oval_state_content_iterator* contents = state ? oval_state_get_contents(state) : nullptr;
  while (out.tied && contents && oval_state_content_iterator_has_more(contents)) {
    struct oval_state_content* content = oval_state_content_iterator_next(contents);
    AddEntityVariable(oval_state_content_get_entity(content), out, depth);
  }
  if (contents) oval_state_content_iterator_free(contents);
}

void OvalFootprintReader::AddObject(struct oval_object* object, CheckFootprint& out, int depth) {
  if (!out.tied) return;
  if (depth > kMaxDepth) return Untie(out, fmt::format("variables nested more than {} deep", kMaxDepth));
  const std::string type = oval_subtype_get_text(oval_object_get_subtype(object));
  auto file = [](std::string path) {
    return PathPattern{.filepath = std::make_shared<const EntityMatch>(EntityMatch::Equal(std::move(path)))};
  };
  const bool variable_object = type == "variable";
  if (type == "dpkginfo") out.paths.push_back(file(std::string(kDpkgStatusPath)));
  else if (type == "password") out.paths.push_back(file("/etc/passwd"));
  else if (type == "shadow") out.paths.push_back(file("/etc/shadow"));
  else if (!kFileObjectTypes.count(type) && !kFixedObjectTypes.count(type) && !variable_object)
    return Untie(out, fmt::format("a {} object", type));

  PathPattern pattern;
  bool has_filename = false;
  struct oval_object_content_iterator* contents = oval_object_get_object_contents(object);
  while (out.tied && contents && oval_object_content_iterator_has_more(contents)) {
    struct oval_object_content* content = oval_object_content_iterator_next(contents);
    if (oval_object_content_get_type(content) == OVAL_OBJECTCONTENT_FILTER) {
      // A filter narrows what the object finds, never widens it; its state may read a variable.
      struct oval_filter* filter = oval_object_content_get_filter(content);
      if (filter) AddState(oval_filter_get_state(filter), out, depth);
      continue;
    }
    if (oval_object_content_get_type(content) != OVAL_OBJECTCONTENT_ENTITY) {
      Untie(out, fmt::format("a {} object made from a set of objects", type));
      break;
    }
    struct oval_entity* e = oval_object_content_get_entity(content);
    const std::string field = OscapText(oval_object_content_get_field_name(content));
    if (variable_object && field == "var_ref") {
      struct oval_variable* v = oval_entity_get_variable(e);
      if (!v && model_ && oval_entity_get_value(e)) {
        v = oval_definition_model_get_variable(model_,
                                               OscapText(oval_value_get_text(oval_entity_get_value(e))).c_str());
      }
      if (!v) Untie(out, "a variable object whose variable is missing");
      else AddVariable(v, out, depth + 1);
      continue;
    }
    AddEntityVariable(e, out, depth);
    if (!kFileObjectTypes.count(type) || (field != "filepath" && field != "path" && field != "filename")) continue;
    Entity entity = ReadEntity(e);
    if (!entity.untied.empty() || (entity.nil && field != "filename")) {
      Untie(out, entity.untied.empty() ? fmt::format("a {} object with no {}", type, field) : entity.untied);
      break;
    }
    if (field == "filepath") pattern.filepath = entity.match;
    if (field == "path") pattern.dir = entity.match;
    if (field == "filename") {
      has_filename = true;
      pattern.name = entity.match;  // null when nil: the directory itself
    }
  }
  if (contents) oval_object_content_iterator_free(contents);
  if (!out.tied || !kFileObjectTypes.count(type)) return;

  struct oval_behavior_iterator* behaviors = oval_object_get_behaviors(object);
  bool recurse_up = false;
  while (behaviors && oval_behavior_iterator_has_more(behaviors)) {
    struct oval_behavior* b = oval_behavior_iterator_next(behaviors);
    if (OscapText(oval_behavior_get_key(b)) != "recurse_direction") continue;
    const std::string direction = OscapText(oval_behavior_get_value(b));
    pattern.recurse_down = direction == "down";
    recurse_up = direction == "up";
  }
  if (behaviors) oval_behavior_iterator_free(behaviors);
  if (recurse_up) return Untie(out, fmt::format("a {} object that searches upwards", type));
  if (!pattern.filepath && (!pattern.dir || (!has_filename && type != "file"))) {
    return Untie(out, fmt::format("a {} object without a file path", type));
  }
  out.paths.push_back(std::move(pattern));
}

void OvalFootprintReader::AddEntityVariable(struct oval_entity* entity, CheckFootprint& out, int depth) {
  if (!entity || oval_entity_get_varref_type(entity) == OVAL_ENTITY_VARREF_NONE) return;
  struct oval_variable* v = oval_entity_get_variable(entity);
  if (!v) return Untie(out, "a value from a variable that is missing");
  AddVariable(v, out, depth + 1);
}

void OvalFootprintReader::AddVariable(struct oval_variable* variable, CheckFootprint& out, int depth) {
  if (!out.tied) return;
  if (depth > kMaxDepth) return Untie(out, fmt::format("variables nested more than {} deep", kMaxDepth));
  // Constant and external (XCCDF value) variables are fixed for the whole evaluation.
  if (oval_variable_get_type(variable) != OVAL_VARIABLE_LOCAL) return;
  AddComponent(oval_variable_get_component(variable), out, depth);
}

void OvalFootprintReader::AddComponent(struct oval_component* component, CheckFootprint& out, int depth) {
  if (!component || !out.tied) return;
  if (depth > kMaxDepth) return Untie(out, fmt::format("variables nested more than {} deep", kMaxDepth));
  switch (oval_component_get_type(component)) {
    case OVAL_COMPONENT_LITERAL:
      return;
    case OVAL_COMPONENT_OBJECTREF: {
      struct oval_object* object = oval_component_get_object(component);
      if (!object) return Untie(out, "a variable reading an object that is missing");
      return AddObject(object, out, depth + 1);
    }
    case OVAL_COMPONENT_VARREF: {
      struct oval_variable* v = oval_component_get_variable(component);
      if (!v) return Untie(out, "a variable reading a variable that is missing");
      return AddVariable(v, out, depth + 1);
    }
    default: {
      // A function (concat, regex_capture, count, ...): what its arguments read.
      struct oval_component_iterator* args = oval_component_get_function_components(component);
      if (!args) return Untie(out, "a variable component of unknown type");
      while (out.tied && oval_component_iterator_has_more(args)) {
        AddComponent(oval_component_iterator_next(args), out, depth + 1);
      }
      oval_component_iterator_free(args);
    }
  }
}

}  // namespace temper::stig
