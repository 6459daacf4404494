// OvalFootprintReader: reads a rule's CheckFootprint (check_footprint.h) from the OVAL definition
// its check runs, through libopenscap's OVAL model, while Content::Load holds that model.
//
// What a definition reads: the objects of its tests, of its extended definitions, and of the
// local variables its objects, states and filters take values from (a variable_object, a state
// compared with a value read from another file); constant and external (XCCDF) variables are
// fixed for a whole evaluation.
// Thread safety: one reader per Load; the model it reads must outlive it.
#pragma once

#include <map>
#include <string>

#include "stig/scap/check_footprint.h"
#include "stig/scap/oscap_api.h"

namespace temper::stig {

class OvalFootprintReader {
 public:
  // The footprint of everything `definition` (of `model`) reads.
  const CheckFootprint& Read(struct oval_definition_model* model, struct oval_definition* definition);

 private:
  const CheckFootprint& Read(struct oval_definition* definition, int depth);
  void AddCriteria(struct oval_criteria_node* node, CheckFootprint& out, int depth);
  void AddTest(struct oval_test* test, CheckFootprint& out, int depth);
  void AddObject(struct oval_object* object, CheckFootprint& out, int depth);
  void AddState(struct oval_state* state, CheckFootprint& out, int depth);
  // What a value taken from an entity's var_ref, or from `variable`, reads.
  void AddEntityVariable(struct oval_entity* entity, CheckFootprint& out, int depth);
  void AddVariable(struct oval_variable* variable, CheckFootprint& out, int depth);
  void AddComponent(struct oval_component* component, CheckFootprint& out, int depth);

  struct oval_definition_model* model_ = nullptr;
  std::map<std::string, CheckFootprint> by_definition_;  // extended definitions are shared widely
};

}  // namespace temper::stig
