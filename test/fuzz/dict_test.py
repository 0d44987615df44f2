#!/usr/bin/env python3
"""The model fuzzer's dictionary (test/fuzz/model.dict) holds every token the description parser
knows: each operator kind of workerd/nn/ops/kinds.def (the one list of kinds) and each JSON field
name, or choice value, that a FieldReader in workerd/nn reads with a literal name, as a quoted
JSON string ("\\"kind\\""). A kind or field added without its dictionary entry fails here, naming it.

Fields are found per statement: a statement that passes a FieldReader variable (declared
`FieldReader name` or `FieldReader& name` in the same file) as receiver or argument contributes
every string literal in it that looks like an identifier. Names read from tables (an initializer's
parameter: initializer.cpp) are not seen; the dictionary lists those by hand. The recipe's fields
(the list kRecipeFields in workerd/nn/recipe.cpp, which a model's "recipe" and a recipe file share)
must be in model.dict and in the recipe fuzzer's recipe.dict. The ONNX dictionary
(onnx.dict) is checked from the registry itself: test/nn/op_registry_test.cpp.
Usage: dict_test.py SOURCE_ROOT. The scanner first runs on made-up files, so one that stopped
finding anything fails too."""
import re
import sys
from pathlib import Path

KIND_LINE = re.compile(r'^\s*PSRUN_(?:FAMILY_)?KIND\(\s*"([a-z0-9_]+)"', re.M)
READER_DECL = re.compile(r'\bFieldReader\s*&?\s+(\w+)')
IDENTIFIER_LITERAL = re.compile(r'"([a-z][a-z0-9_]*)"')
COMMENT = re.compile(r'//[^\n]*')


def kinds(kinds_def_text):
    return set(KIND_LINE.findall(kinds_def_text))


def fields(source_text):
    """The identifier-like literals of the statements that use a FieldReader."""
    text = COMMENT.sub("", source_text)
    readers = set(READER_DECL.findall(text))
    if not readers:
        return set()
    use = re.compile(r'\b(%s)\b\s*[.,)]' % "|".join(sorted(readers)))
    found = set()
    for statement in re.split(r'[;{}]\s*\n', text):
        if use.search(statement):
            found.update(IDENTIFIER_LITERAL.findall(statement))
    return found


RECIPE_FIELDS = re.compile(r'\bkRecipeFields\s*=\s*\{([^}]*)\}')


def recipe_fields(recipe_cpp_text):
    """The names listed in recipe.cpp's kRecipeFields = {...}."""
    m = RECIPE_FIELDS.search(COMMENT.sub("", recipe_cpp_text))
    return set(IDENTIFIER_LITERAL.findall(m.group(1))) if m else set()


def dictionary_tokens(dict_text):
    """The JSON strings a libFuzzer dictionary holds: lines "\\"token\\"" (other entries ignored)."""
    return set(re.findall(r'^\s*(?:\w+=)?"\\"([^"\\]*)\\""\s*$', dict_text, re.M))


def missing(expected, dict_text):
    return sorted(expected - dictionary_tokens(dict_text))


def self_test():
    assert kinds('PSRUN_KIND("conv2d", conv2d_schema, k)\n  PSRUN_FAMILY_KIND("relu", a, b)\n'
                 '// PSRUN_KIND(kind, schema, kernel)\n') == {"conv2d", "relu"}
    src = ('Result<void> parse_x(FieldReader& reader, nlohmann::json& attrs) {\n'
           '    auto g = reader.integer("groups", 1, 1, 8);\n'
           '    auto m = axes_field(reader, "output_padding", 2, 0, 0);\n'
           '    auto c = reader.choice("mode", 0, {"nearest", "linear"});\n'
           '    attrs["not_a_field"] = 1;\n'
           '    return {};\n}\n')
    assert fields(src) == {"groups", "output_padding", "mode", "nearest", "linear"}, fields(src)
    assert fields('int f() { return g("x"); }\n') == set()
    d = '# comment\n"\\"groups\\""\nkw="\\"mode\\""\n"Conv"\n'
    assert dictionary_tokens(d) == {"groups", "mode"}, dictionary_tokens(d)
    assert missing({"groups", "mode", "linear"}, d) == ["linear"]
    assert recipe_fields('constexpr std::array kRecipeFields = {"optimizer",  // x\n "ema_decay"};') == \
        {"optimizer", "ema_decay"}


def main():
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2]
    self_test()
    dict_text = (root / "test/fuzz/model.dict").read_text()
    all_kinds = kinds((root / "workerd/nn/ops/kinds.def").read_text())
    all_fields = set()
    for p in sorted((root / "workerd/nn").rglob("*.cpp")):
        all_fields |= fields(p.read_text(errors="replace"))
    failures = []
    if len(all_kinds) < 60 or len(all_fields) < 60:  # the scanners still find the tree's names
        failures.append(f"found only {len(all_kinds)} kinds and {len(all_fields)} fields: is the scanner broken?")
    failures += [f'kind "{k}" (workerd/nn/ops/kinds.def) is missing from test/fuzz/model.dict: add "\\"{k}\\""'
                 for k in missing(all_kinds, dict_text)]
    failures += [f'field or value "{f}" (read in workerd/nn) is missing from test/fuzz/model.dict: add "\\"{f}\\""'
                 for f in missing(all_fields - all_kinds, dict_text)]
    recipe = recipe_fields((root / "workerd/nn/recipe.cpp").read_text())
    if len(recipe) < 19:
        failures.append(f"found only {len(recipe)} recipe fields in workerd/nn/recipe.cpp's kRecipeFields: is the scanner broken?")
    for name in ("model.dict", "recipe.dict"):
        failures += [f'recipe field "{f}" (workerd/nn/recipe.cpp kRecipeFields) is missing from test/fuzz/{name}: '
                     f'add "\\"{f}\\""' for f in missing(recipe, (root / "test/fuzz" / name).read_text())]
    for f in failures:
        print(f)
    print(f"{len(all_kinds)} kinds, {len(all_fields)} fields and values, {len(recipe)} recipe fields, "
          f"{len(failures)} missing")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
