// The writer's own bindings of names to values (the timeline's compound type, the summary's
// tables and attributes, the op kinds) are the schema's (src/app/run_file_schema.json): a field
// added to one and not the other fails here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "app/h5.hpp"
#include "app/run_file.hpp"
#include "app/run_file_checks.hpp"
#include "app/summary.hpp"

namespace ridgeline {
namespace {

using Shape = std::vector<std::pair<std::string, schema::ValueClass>>;

schema::ValueClass class_of(const ColumnValues& values) {
  if (std::holds_alternative<std::vector<int64_t>>(values)) return schema::ValueClass::Int;
  if (std::holds_alternative<std::vector<double>>(values)) return schema::ValueClass::Float;
  return schema::ValueClass::String;
}

Shape shape_of(const Table& table) {
  Shape shape;
  for (const Column& column : table)
    shape.emplace_back(column.name, class_of(column.values));
  return shape;
}

Shape shape_of(const schema::Table& spec) {
  Shape shape;
  for (const schema::Field& field : schema::fields(spec))
    shape.emplace_back(field.name, field.value_class);
  return shape;
}

// The same fields with the same classes, in any order.
std::map<std::string, schema::ValueClass> as_map(const Shape& shape) {
  return {shape.begin(), shape.end()};
}

TEST(RunFileSchema, TimelineIsWrittenWithTheSchemasFieldsInOrder) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("ridgeline_test_schema." + std::to_string(::getpid()) + ".h5");
  {
    h5::Handle file = h5::create_file(path.string());
    TimelineRecord row{};
    h5::write_timeline(file.id(), "timeline", {row});
  }
  Table table;
  {
    h5::Handle file = h5::open_file_read(path.string());
    table = h5::read_table(file.id(), "timeline");
  }
  std::filesystem::remove(path);
  EXPECT_EQ(shape_of(table), shape_of(schema::tables::timeline));
}

TEST(RunFileSchema, SummaryOpsAreTheSchemasFields) {
  EXPECT_EQ(as_map(shape_of(aggregates_table({OpAggregate{}}))),
            as_map(shape_of(schema::tables::summary_ops)));
  for (const schema::Field& field : schema::fields(schema::tables::summary_ops))
    EXPECT_EQ(run_file_detail::is_attribution_field(field.name), !schema::always(field.required))
        << field.name;
}

TEST(RunFileSchema, DecodeBinsAreTheSchemasFields) {
  EXPECT_EQ(as_map(shape_of(decode_bins_table({DecodeBin{}}))),
            as_map(shape_of(schema::tables::decode_bins)));
}

TEST(RunFileSchema, StepStatisticsAreTheSchemasRequiredSummaryAttributes) {
  std::vector<std::string> written = {"count", "warmup_to_steady"};
  for (const run_file_detail::StepField& field : run_file_detail::kStepFields)
    written.emplace_back(field.name);
  std::sort(written.begin(), written.end());
  std::vector<std::string> required =
      run_file_detail::required_attributes(schema::attributes::summary);
  std::sort(required.begin(), required.end());
  EXPECT_EQ(written, required);
}

TEST(RunFileSchema, OpKindsAreTheSchemasEnum) {
  std::vector<std::string> kinds;
  for (int k = 0; k <= static_cast<int>(OpKind::other); ++k)
    kinds.emplace_back(op_kind_name(static_cast<OpKind>(k)));
  EXPECT_EQ(kinds, std::vector<std::string>(std::begin(schema::enums::op_kind),
                                            std::end(schema::enums::op_kind)));
}

} // namespace
} // namespace ridgeline
