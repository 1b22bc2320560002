#!/usr/bin/python3
"""Check WattBus resources against deploy/operator/crd.yaml without an API server:

    operator_crd.py CRD_YAML RESOURCE_YAML...

As the API server would: the OpenAPI schema's defaults applied, the object
validated against the schema (python3-jsonschema: the x-kubernetes-* keys and
`nullable` turned into what they mean), then every x-kubernetes-validations
rule evaluated on the object it sits on. The rules are CEL; this evaluates the
subset the CRD uses (has(), ==, !=, !, &&, ||, parentheses, string literals,
field paths from self) and refuses any other rule, so a rule this cannot read
fails the check instead of passing unseen.
Prints `OK NAME` or `REFUSED NAME: reason` per resource; exits 1 if the CRD
itself is malformed.
"""
import copy
import re
import sys

import jsonschema
import yaml


def version_schema(crd):
    if crd.get("kind") != "CustomResourceDefinition" or crd["spec"]["scope"] != "Cluster":
        sys.exit("not a cluster-scoped CustomResourceDefinition")
    vs = [v for v in crd["spec"]["versions"] if v.get("storage")]
    if len(vs) != 1:
        sys.exit("the CRD needs exactly one storage version")
    return crd["spec"]["group"] + "/" + vs[0]["name"], crd["spec"]["names"]["kind"], vs[0]["schema"]["openAPIV3Schema"]


def to_jsonschema(s):
    """The structural schema as plain JSON Schema (draft 4, which OpenAPI v3's follows)."""
    out = {}
    for k, v in s.items():
        if k.startswith("x-kubernetes-") or k in ("default", "description", "nullable", "format"):
            continue
        if k == "properties":
            out[k] = {n: to_jsonschema(p) for n, p in v.items()}
        elif k == "items" or (k == "additionalProperties" and isinstance(v, dict)):
            out[k] = to_jsonschema(v)
        else:
            out[k] = v
    if s.get("x-kubernetes-preserve-unknown-fields"):
        out.pop("additionalProperties", None)
    if s.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def apply_defaults(s, obj):
    """The API server's defaulting: a missing property with a default gets it, recursively."""
    if isinstance(obj, dict):
        for n, p in s.get("properties", {}).items():
            if n not in obj and "default" in p:
                obj[n] = copy.deepcopy(p["default"])
            if n in obj:
                apply_defaults(p, obj[n])
    elif isinstance(obj, list) and "items" in s:
        for v in obj:
            apply_defaults(s["items"], v)


TOKEN = re.compile(r"\s*(?:(has)\(|(self(?:\.[A-Za-z_][A-Za-z0-9_]*)*)|'([^'\\]*)'|(==|!=|&&|\|\||!|\(|\)))")


class CelError(Exception):
    pass


def cel_eval(rule, self_obj):
    """Evaluate RULE (the CEL subset above) with `self` bound to SELF_OBJ."""
    toks, pos = [], 0
    while pos < len(rule):
        if rule[pos:].strip() == "":
            break
        m = TOKEN.match(rule, pos)
        if not m:
            raise CelError(f"rule {rule!r}: cannot read {rule[pos:]!r}")
        toks.append(("has", None) if m.group(1) else ("path", m.group(2)) if m.group(2)
                    else ("str", m.group(3)) if m.group(3) is not None else ("op", m.group(4)))
        pos = m.end()
    toks.append(("end", None))
    i = 0

    def peek():
        return toks[i]

    def take(kind, val=None):
        nonlocal i
        t = toks[i]
        if t[0] != kind or (val is not None and t[1] != val):
            raise CelError(f"rule {rule!r}: expected {val or kind}, found {t[1] or t[0]}")
        i += 1
        return t

    def lookup(path, must):
        cur = self_obj
        for part in path.split(".")[1:]:
            if not isinstance(cur, dict) or part not in cur:
                if must:
                    raise CelError(f"no such key: {path}")
                return None, False
            cur = cur[part]
        return cur, True

    def primary():
        t = peek()
        if t == ("op", "("):
            take("op", "(")
            v = disj()
            take("op", ")")
            return v
        if t == ("op", "!"):
            take("op", "!")
            v = primary()
            if not isinstance(v, bool):
                raise CelError(f"rule {rule!r}: ! of a non-bool")
            return not v
        if t[0] == "has":
            take("has")
            p = take("path")[1]
            take("op", ")")
            if "." not in p:
                raise CelError(f"rule {rule!r}: has() needs a field")
            return lookup(p, False)[1]
        if t[0] == "path":
            return lookup(take("path")[1], True)[0]
        if t[0] == "str":
            return take("str")[1]
        raise CelError(f"rule {rule!r}: unexpected {t[1] or t[0]}")

    def comparison():
        a = primary()
        if peek() in (("op", "=="), ("op", "!=")):
            op = take("op")[1]
            b = primary()
            return (a == b) if op == "==" else (a != b)
        return a

    def conj():
        v = comparison()
        while peek() == ("op", "&&"):
            take("op", "&&")
            w = comparison()
            v = bool(v) and bool(w)
        return v

    def disj():
        v = conj()
        while peek() == ("op", "||"):
            take("op", "||")
            w = conj()
            v = bool(v) or bool(w)
        return v

    v = disj()
    take("end")
    if not isinstance(v, bool):
        raise CelError(f"rule {rule!r} is not a bool")
    return v


def cel_check(s, obj, where, errors):
    """Every x-kubernetes-validations rule on the value it is declared on (absent values: none)."""
    for r in s.get("x-kubernetes-validations", []):
        if not cel_eval(r["rule"], obj):
            errors.append(f"{where}: {r.get('message', r['rule'])}")
    if isinstance(obj, dict):
        for n, p in s.get("properties", {}).items():
            if n in obj:
                cel_check(p, obj[n], f"{where}.{n}", errors)
    elif isinstance(obj, list) and "items" in s:
        for k, v in enumerate(obj):
            cel_check(s["items"], v, f"{where}[{k}]", errors)


def check(api_version, kind, schema, obj):
    if obj.get("apiVersion") != api_version or obj.get("kind") != kind:
        return [f"not a {api_version} {kind}"]
    obj = copy.deepcopy(obj)
    apply_defaults(schema, obj)
    v = jsonschema.Draft4Validator(to_jsonschema(schema))
    errors = [f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
              for e in sorted(v.iter_errors(obj), key=lambda e: list(e.absolute_path))]
    if not errors:
        cel_check(schema, obj, "(root)", errors)
    return errors


def main():
    with open(sys.argv[1]) as f:
        api_version, kind, schema = version_schema(yaml.safe_load(f))
    for path in sys.argv[2:]:
        with open(path) as f:
            for obj in yaml.safe_load_all(f):
                name = obj.get("metadata", {}).get("name", "?")
                try:
                    errors = check(api_version, kind, schema, obj)
                except CelError as e:
                    print(f"ERROR {name}: {e}")
                    sys.exit(1)
                print(f"OK {name}" if not errors else f"REFUSED {name}: " + "; ".join(errors))


if __name__ == "__main__":
    main()
