# Turns the run file's schema (src/app/run_file_schema.json) into the C++ tables the validator
# checks against: cmake -DSCHEMA=<json> -DOUT=<header> -P run_file_schema.cmake (src/CMakeLists.txt
# runs it whenever the JSON changes).
cmake_policy(VERSION 3.24)
file(READ "${SCHEMA}" json)

# `required` of a field, dataset or attribute: "always", "optional" or a condition's name.
function(required_of object out)
  string(JSON kind ERROR_VARIABLE missing TYPE "${object}" required)
  if(missing)
    set(value "always")
  elseif(kind STREQUAL "BOOLEAN")
    string(JSON flag GET "${object}" required)
    if(flag)
      set(value "always")
    else()
      set(value "optional")
    endif()
  else()
    string(JSON value GET "${object}" required)
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

function(flag_of object key out)
  string(JSON value ERROR_VARIABLE missing GET "${object}" ${key})
  if(NOT missing AND value)
    set(${out} "true" PARENT_SCOPE)
  else()
    set(${out} "false" PARENT_SCOPE)
  endif()
endfunction()

function(class_of dtype out)
  if(dtype MATCHES "^u?int")
    set(${out} "ValueClass::Int" PARENT_SCOPE)
  elseif(dtype MATCHES "^float")
    set(${out} "ValueClass::Float" PARENT_SCOPE)
  elseif(dtype STREQUAL "string")
    set(${out} "ValueClass::String" PARENT_SCOPE)
  else()
    set(${out} "ValueClass::Any" PARENT_SCOPE)
  endif()
endfunction()

# A C++ identifier for a name of the file ("stage<p>.bubble" -> stage_p_bubble).
function(identifier name out)
  string(REGEX REPLACE "[^A-Za-z0-9_]+" "_" id "${name}")
  string(REGEX REPLACE "^_+|_+$" "" id "${id}")
  set(${out} "${id}" PARENT_SCOPE)
endfunction()

# The names of an entry: its `name`, a string or a list of strings.
function(names_of object out)
  string(JSON kind TYPE "${object}" name)
  set(names "")
  if(kind STREQUAL "ARRAY")
    string(JSON count LENGTH "${object}" name)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON one GET "${object}" name ${i})
      list(APPEND names "${one}")
    endforeach()
  else()
    string(JSON names GET "${object}" name)
  endif()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

function(string_list array_json out)
  string(JSON count LENGTH "${array_json}")
  set(items "")
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON one GET "${array_json}" ${i})
    string(APPEND items "\"${one}\", ")
  endforeach()
  string(REGEX REPLACE ", $" "" items "${items}")
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

string(JSON version GET "${json}" schema_version)
set(text "// Generated from src/app/run_file_schema.json by cmake/run_file_schema.cmake: edit the JSON.
#pragma once

#include <cstddef>
#include <string_view>

namespace ridgeline::schema {

inline constexpr long kVersion = ${version};

/// The type class a dataset or field must have (Any: integer, float or string).
enum class ValueClass { Int, Float, String, Any };
/// An attribute's type: Count is an integer >= 1, Flag the integer 0 or 1, Number an integer or
/// a float.
enum class AttrType { Int, Count, Flag, Number, Text };

/// `required`: \"always\", \"optional\" (checked where present) or the condition that requires it.
struct Field {
  const char* name;
  ValueClass value_class;
  const char* required;
  bool positive; ///< every row > 0
};
struct Table {
  const char* path;
  const char* required;
  bool names_only; ///< fields checked for presence, not type
  const Field* fields;
  std::size_t size;
};
struct Dataset {
  const char* path;
  ValueClass value_class;
  const char* required;
};
struct Attribute {
  const char* name;
  AttrType type;
  const char* required;
  bool code; ///< checked by code of its own (or for presence only), not by type
};
struct AttributeGroup {
  const char* path;
  const Attribute* attributes;
  std::size_t size;
};
/// The entries of a table or an attribute group, for range-for.
template <class T> struct Entries {
  const T* first;
  std::size_t size;
  constexpr const T* begin() const { return first; }
  constexpr const T* end() const { return first + size; }
};
constexpr Entries<Field> fields(const Table& table) { return {table.fields, table.size}; }
constexpr Entries<Attribute> attributes_of(const AttributeGroup& group) {
  return {group.attributes, group.size};
}
/// Whether `required` asks for the object in every file of its kind.
constexpr bool always(const char* required) { return std::string_view(required) == \"always\"; }

")

# string_arrays(OBJECT_KEY NAMESPACE): one constexpr array of strings per member of the JSON
# object at OBJECT_KEY (files: the groups each kind of file must have; enums: their values).
function(string_arrays key namespace)
  string(JSON object GET "${json}" ${key})
  string(JSON count LENGTH "${object}")
  math(EXPR last "${count} - 1")
  set(out "namespace ${namespace} {\n")
  foreach(i RANGE ${last})
    string(JSON name MEMBER "${object}" ${i})
    string(JSON values GET "${object}" ${name})
    string_list("${values}" items)
    string(APPEND out "inline constexpr const char* ${name}[] = {${items}};\n")
  endforeach()
  set(text "${text}${out}} // namespace ${namespace}\n\n" PARENT_SCOPE)
endfunction()
string_arrays(files files)
string_arrays(enums enums)

# Tables: their field lists, and a constant per field name.
string(JSON tables GET "${json}" tables)
string(JSON count LENGTH "${tables}")
math(EXPR last "${count} - 1")
set(specs "namespace tables {\n")
set(constants "namespace field {\n")
foreach(i RANGE ${last})
  string(JSON table GET "${tables}" ${i})
  string(JSON id GET "${table}" id)
  string(JSON path GET "${table}" path)
  required_of("${table}" table_required)
  string(JSON check ERROR_VARIABLE no_check GET "${table}" check)
  set(names_only "false")
  if(NOT no_check AND check STREQUAL "names")
    set(names_only "true")
  endif()
  string(JSON fields GET "${table}" fields)
  string(JSON field_count LENGTH "${fields}")
  math(EXPR field_last "${field_count} - 1")
  set(rows "")
  set(size 0)
  string(APPEND constants "namespace ${id} {\n")
  foreach(j RANGE ${field_last})
    string(JSON field GET "${fields}" ${j})
    names_of("${field}" names)
    string(JSON dtype GET "${field}" dtype)
    class_of("${dtype}" value_class)
    required_of("${field}" required)
    flag_of("${field}" positive positive)
    foreach(name IN LISTS names)
      string(APPEND rows "    {\"${name}\", ${value_class}, \"${required}\", ${positive}},\n")
      identifier("${name}" id_name)
      string(APPEND constants "inline constexpr const char* ${id_name} = \"${name}\";\n")
      math(EXPR size "${size} + 1")
    endforeach()
  endforeach()
  string(APPEND constants "} // namespace ${id}\n")
  string(APPEND specs "inline constexpr Field ${id}_fields[] = {\n${rows}};\n")
  string(APPEND specs "inline constexpr Table ${id} = {\"${path}\", \"${table_required}\", "
                      "${names_only}, ${id}_fields, ${size}};\n")
endforeach()
string(APPEND specs "} // namespace tables\n\n")
string(APPEND constants "} // namespace field\n\n")
string(APPEND text "${specs}${constants}")

# Datasets other than tables.
string(JSON datasets GET "${json}" datasets)
string(JSON count LENGTH "${datasets}")
math(EXPR last "${count} - 1")
string(APPEND text "namespace datasets {\n")
foreach(i RANGE ${last})
  string(JSON dataset GET "${datasets}" ${i})
  string(JSON id GET "${dataset}" id)
  string(JSON path GET "${dataset}" path)
  string(JSON dtype GET "${dataset}" dtype)
  class_of("${dtype}" value_class)
  required_of("${dataset}" required)
  string(APPEND text "inline constexpr Dataset ${id} = {\"${path}\", ${value_class}, \"${required}\"};\n")
endforeach()
string(APPEND text "} // namespace datasets\n\n")

# Attribute groups, and a constant per attribute name.
string(JSON groups GET "${json}" attributes)
string(JSON count LENGTH "${groups}")
math(EXPR last "${count} - 1")
set(specs "namespace attributes {\n")
set(constants "namespace attr {\n")
foreach(i RANGE ${last})
  string(JSON group GET "${groups}" ${i})
  string(JSON id GET "${group}" id)
  string(JSON path GET "${group}" path)
  string(JSON attrs GET "${group}" attributes)
  string(JSON attr_count LENGTH "${attrs}")
  math(EXPR attr_last "${attr_count} - 1")
  set(rows "")
  string(APPEND constants "namespace ${id} {\n")
  foreach(j RANGE ${attr_last})
    string(JSON attr GET "${attrs}" ${j})
    string(JSON name GET "${attr}" name)
    string(JSON type GET "${attr}" type)
    string(SUBSTRING "${type}" 0 1 head)
    string(TOUPPER "${head}" head)
    string(SUBSTRING "${type}" 1 -1 tail)
    required_of("${attr}" required)
    flag_of("${attr}" code code)
    string(APPEND rows "    {\"${name}\", AttrType::${head}${tail}, \"${required}\", ${code}},\n")
    identifier("${name}" id_name)
    string(APPEND constants "inline constexpr const char* ${id_name} = \"${name}\";\n")
  endforeach()
  string(APPEND constants "} // namespace ${id}\n")
  string(APPEND specs "inline constexpr Attribute ${id}_attributes[] = {\n${rows}};\n")
  string(APPEND specs "inline constexpr AttributeGroup ${id} = {\"${path}\", ${id}_attributes, "
                      "${attr_count}};\n")
endforeach()
string(APPEND specs "} // namespace attributes\n\n")
string(APPEND constants "} // namespace attr\n\n")
string(APPEND text "${specs}${constants}} // namespace ridgeline::schema\n")

file(WRITE "${OUT}" "${text}")
