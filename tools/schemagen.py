#!/usr/bin/env python3
"""Generate the C message structs and codec tables from schemas/*.json.

schemas/ is the single source of truth for keys, types and bounds: this script
turns each kind's JSON Schema into a C struct and a field table that the
generic codec (lib/codec_dec.c, lib/codec_enc.c) walks. Usage: schemagen.py SCHEMA_DIR OUT.h OUT.c
"""
import json
import os
import sys

KINDS = ["power", "usage", "aligned", "estimate", "model", "stat"]
I64_MAX = 9223372036854775807
# No C0 control, DEL or C1 control: what the codec checks in an x-identity string.
IDENT_PATTERN = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$"


class Gen:
    def __init__(self, sdir):
        self.sdir = sdir
        self.files = {}
        self.types = {}  # c name -> (schema, flat_env)
        self.order = []  # c names in dependency order
        self.tables = []  # C source of field tables

    def load(self, name):
        if name not in self.files:
            with open(os.path.join(self.sdir, name)) as f:
                self.files[name] = json.load(f)
        return self.files[name]

    def resolve(self, node, cur):
        """Follow $ref (file.json, #/ptr or file.json#/ptr); returns (node, file)."""
        while "$ref" in node:
            ref = node["$ref"]
            fname, _, ptr = ref.partition("#")
            fname = fname or cur
            target = self.load(fname)
            for part in [p for p in ptr.split("/") if p]:
                target = target[part]
            extra = {k: v for k, v in node.items() if k != "$ref"}
            node = dict(target)
            node.update(extra)
            cur = fname
        return node, cur

    def ctype(self, prop, cur, key):
        """C declaration pieces for a property: (kind, info)."""
        prop, cur = self.resolve(prop, cur)
        t = prop.get("type")
        if t == "integer":
            lo = prop.get("minimum", -I64_MAX - 1)
            hi = prop.get("maximum", I64_MAX)
            if lo >= 0:
                return ("u64", {"min": lo, "max": hi})
            return ("i64", {"min": lo, "max": hi})
        if t == "number":
            return ("f64", {"min": prop.get("minimum", -1e308), "max": prop.get("maximum", 1e308)})
        if t == "boolean":
            return ("bool", {})
        if t == "string":
            if "maxLength" not in prop:
                sys.exit(f"{cur}: string {key} has no maxLength")
            # An identity (envelope.json#/$defs/name): the codec refuses control characters
            # in it. Its pattern says so to any JSON Schema validator; the codec knows this one
            # pattern only, so another is an error rather than a rule silently not applied.
            ident = bool(prop.get("x-identity"))
            if "pattern" in prop and (not ident or prop["pattern"] != IDENT_PATTERN):
                sys.exit(f"{cur}: string {key}: the codec enforces no pattern but x-identity's")
            if ident and prop.get("pattern") != IDENT_PATTERN:
                sys.exit(f"{cur}: string {key}: x-identity without its pattern")
            return ("str", {"min": prop.get("minLength", 0), "max": prop["maxLength"], "ident": ident})
        if t == "object":
            name = prop.get("x-c-type")
            if not name:
                sys.exit(f"{cur}: object {key} has no x-c-type")
            self.add_type(name, prop, cur)
            return ("obj", {"type": name})
        if t == "array":
            if "maxItems" not in prop:
                sys.exit(f"{cur}: array {key} has no maxItems")
            ek, ei = self.ctype(prop["items"], cur, key + "[]")
            if ek == "arr":
                sys.exit(f"{cur}: nested arrays are not supported ({key})")
            return ("arr", {"min": prop.get("minItems", 0), "max": prop["maxItems"], "elem": (ek, ei)})
        sys.exit(f"{cur}: {key}: unsupported type {t}")

    def owns(self, name):
        """Whether a struct of this type holds memory to free: an array, or an object that does."""
        t = self.types[name]
        if t["flat"] and self.owns(t["flat"]):
            return True
        for _key, k, info, _req in t["fields"]:
            if k == "arr" or (k == "obj" and self.owns(info["type"])):
                return True
        return False

    def add_type(self, name, schema, cur):
        if name in self.types:
            return
        self.types[name] = None  # placeholder against cycles
        fields = []
        flat = None
        for sub in schema.get("allOf", []):
            s, scur = self.resolve(sub, cur)
            flat = s["x-c-type"]
            self.add_type(flat, s, scur)
        required = set(schema.get("required", []))
        for key, prop in schema.get("properties", {}).items():
            k, info = self.ctype(prop, cur, key)
            fields.append((key, k, info, key in required))
        self.types[name] = {"fields": fields, "flat": flat}
        self.order.append(name)

    # ---- C emitters ----
    def decl(self, key, k, info):
        if k == "u64":
            return f"\tuint64_t {key};"
        if k == "i64":
            return f"\tint64_t {key};"
        if k == "f64":
            return f"\tdouble {key};"
        if k == "bool":
            return f"\tbool {key};"
        if k == "str":
            return f"\tchar {key}[{info['max'] + 1}];"
        if k == "obj":
            return f"\tstruct {info['type']} {key};"
        ek, ei = info["elem"]
        if ek == "str":
            el = f"\tchar (*{key})[{ei['max'] + 1}];"
        else:
            el = self.decl("*" + key, ek, ei)
        return f"{el}\n\tsize_t n_{key};"

    def field_init(self, cname, key, k, info, req, elem=False):
        off = "0" if elem else f"offsetof(struct {cname}, {key})"
        key8 = int.from_bytes(key.encode()[:8], "little")
        parts = [f'.key = "{key}"', f".key_len = {len(key)}", f".key8 = {key8:#x}ULL", f".type = WB_T_{k.upper()}", f".required = {1 if req else 0}", f".off = {off}"]
        # The key as an encoder writes it (a fixstr: header byte, then the bytes), for the
        # decoder to compare with the frame and the encoder to store, 8 bytes at a time.
        wire = bytes([0xa0 | len(key)]) + key.encode()
        if not elem and len(wire) <= 16:
            lo = int.from_bytes(wire[:8], "little")
            hi = int.from_bytes(wire[8:16], "little")
            mlo = (1 << (8 * min(len(wire), 8))) - 1
            mhi = (1 << (8 * max(len(wire) - 8, 0))) - 1
            parts += [f".wire = {{{lo:#x}ULL, {hi:#x}ULL}}", f".wmask = {{{mlo:#x}ULL, {mhi:#x}ULL}}",
                      f".wire_len = {len(wire)}"]
        if k == "u64":
            parts += [f".umin = {info['min']}ULL", f".umax = {info['max']}ULL"]
        elif k == "i64":
            parts += [f".imin = {info['min']}LL", f".imax = {info['max']}LL"]
        elif k == "f64":
            parts += [f".fmin = {float(info['min'])!r}", f".fmax = {float(info['max'])!r}"]
        elif k == "str":
            parts += [f".min_len = {info['min']}", f".max_len = {info['max']}", f".size = {info['max'] + 1}"]
            if info["ident"]:
                parts.append(".ident = 1")
        elif k == "obj":
            parts += [f".obj = &wb_type_{info['type']}", f".size = sizeof(struct {info['type']})"]
        elif k == "arr":
            ek, ei = info["elem"]
            ename = f"wb_elem_{cname}_{key}"
            self.tables.append(
                f"static const struct wb_field {ename} = {{{self.field_init(cname, key + '[]', ek, ei, True, True)}}};\n")
            if ek == "str":
                esize = f"{ei['max'] + 1}"
            elif ek == "obj":
                esize = f"sizeof(struct {ei['type']})"
            elif ek == "bool":
                esize = "sizeof(bool)"
            else:
                esize = "sizeof(uint64_t)"
            parts += [f".off_n = offsetof(struct {cname}, n_{key})", f".min_len = {info['min']}",
                      f".max_len = {info['max']}", f".size = {esize}", f".elem = &{ename}"]
        return ", ".join(parts)

    def emit(self, out_h, out_c):
        h = ["/* Generated by tools/schemagen.py from the JSON Schemas in schemas/: do not edit. */",
             "#ifndef WB_MSGS_H", "#define WB_MSGS_H", "",
             "#include <stdbool.h>", "#include <stddef.h>", "#include <stdint.h>", "",
             '#include "codec_types.h"', ""]
        c = ["/* Generated by tools/schemagen.py from the JSON Schemas in schemas/: do not edit. */",
             "#include <stddef.h>", '#include "wb_msgs.h"', ""]
        for name in self.order:
            t = self.types[name]
            h.append(f"struct {name} {{")
            if t["flat"]:
                h.append(f"\tstruct {t['flat']} env;")
            for key, k, info, _ in t["fields"]:
                h.append(self.decl(key, k, info))
            h.append("};")
            h.append(f"extern const struct wb_type wb_type_{name};")
            h.append("")
            self.tables = []
            rows = []
            if t["flat"]:
                rows.append(f'\t{{.key = "", .type = WB_T_FLAT, .off = offsetof(struct {name}, env), '
                            f'.obj = &wb_type_{t["flat"]}, .size = sizeof(struct {t["flat"]})}},')
            for key, k, info, req in t["fields"]:
                rows.append("\t{" + self.field_init(name, key, k, info, req) + "},")
            c += self.tables
            c.append(f"static const struct wb_field wb_fields_{name}[] = {{")
            c += rows
            c.append("};")
            nkeys = len(t["fields"]) + (len(self.types[t["flat"]]["fields"]) if t["flat"] else 0)
            # The rows that hold memory to free (arrays, objects that own), for wb_msg_clear.
            first = 1 if t["flat"] else 0
            own = ([0] if t["flat"] and self.owns(t["flat"]) else []) + [
                first + i for i, (_key, k, info, _req) in enumerate(t["fields"])
                if k == "arr" or (k == "obj" and self.owns(info["type"]))]
            own_ref = "NULL"
            if own:
                c.append(f"static const uint8_t wb_own_{name}[] = {{{', '.join(map(str, own))}}};")
                own_ref = f"wb_own_{name}"
            # Bit i: fields[i] is required (the flat row's keys are checked against its own type).
            assert first + len(t["fields"]) <= 64, f"{name}: more than 64 keys for the decoder's masks"
            req = sum(1 << (first + i) for i, (_key, _k, _info, r) in enumerate(t["fields"]) if r)
            # The most bytes its map can take when it holds scalars and strings only (every
            # per-process map): the encoder then makes room once for all its keys. A key is
            # stored 16 bytes at a time; a value takes at most 9 bytes, a string 5 + its bytes.
            # (A fast type's integer arrays count their header here, 9 bytes an item more.)
            wire_max = 0
            if not t["flat"] and all(k in ("u64", "i64", "f64", "bool", "str", "arr") for _, k, _, _ in t["fields"]):
                wire_max = 1 + sum(16 + (5 + info["max"] if k == "str" else 5 if k == "arr" else 9)
                                   for _key, k, info, _ in t["fields"])
            # Items the decoder reads in one tight pass when written as the encoder writes them.
            fast = not t["flat"] and len(t["fields"]) <= 15 and all(
                len(key) <= 15 and (k in ("u64", "i64", "bool", "str") or (k == "arr" and info["elem"][0] == "u64"))
                for key, k, info, _ in t["fields"])
            c.append(f'const struct wb_type wb_type_{name} = {{"{name}", sizeof(struct {name}), '
                     f"sizeof(wb_fields_{name}) / sizeof(wb_fields_{name}[0]), wb_fields_{name}, {nkeys}, "
                     f"{len(own)}, {own_ref}, {req:#x}ULL, {wire_max}, {'true' if fast else 'false'}}};")
            c.append("")
        h.append("enum wb_kind {")
        for k in KINDS:
            h.append(f"\tWB_{k.upper()},")
        h.append("\tWB_NKINDS,\n\tWB_KIND_NONE = -1\n};\n")
        h.append("/* A decoded message of any kind; env aliases the first member of each. */")
        h.append("struct wb_msg {\n\tenum wb_kind kind;\n\tunion {\n\t\tstruct wb_envelope env;")
        for k in KINDS:
            h.append(f"\t\tstruct wb_{k} {k};")
        h.append("\t};\n\t/* A decoded message: where the arrays inside array items live (codec_dec.c). */")
        h.append("\tstruct wb_pool *pool;\n};\n")
        h.append("extern const struct wb_kind_info wb_kinds[WB_NKINDS];")
        h.append("\n#endif")
        c.append("const struct wb_kind_info wb_kinds[WB_NKINDS] = {")
        for k in KINDS:
            s = self.load(k + ".json")
            ver = int(s["$id"].rsplit("/", 1)[1])
            c.append(f'\t{{"{k}", WB_{k.upper()}, {ver}, &wb_type_wb_{k}}},')
        c.append("};")
        with open(out_h, "w") as f:
            f.write("\n".join(h) + "\n")
        with open(out_c, "w") as f:
            f.write("\n".join(c) + "\n")


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: schemagen.py SCHEMA_DIR OUT.h OUT.c")
    g = Gen(sys.argv[1])
    for k in KINDS:
        s = g.load(k + ".json")
        if s.get("x-c-type") != "wb_" + k:
            sys.exit(f"{k}.json: x-c-type must be wb_{k}")
        g.add_type("wb_" + k, s, k + ".json")
    g.emit(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
