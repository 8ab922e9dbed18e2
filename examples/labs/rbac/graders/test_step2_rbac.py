"""Step 2: the service account ``shop/auditor`` may read pods in ``shop``, and nothing more:
a Role, a RoleBinding, and the file that holds them as the apiserver would take it."""

from __future__ import annotations

import json

from rbaclab import (
    BINDING,
    NAMESPACE,
    QUERIES,
    RBAC_FILE,
    RBAC_GROUP,
    READ_VERBS,
    ROLE,
    SERVICE_ACCOUNT,
)

from gpushare.lab_api import (
    CheckFailed,
    Json,
    JsonObject,
    LabState,
    LineDict,
    T,
    Workdir,
    check,
    dig,
    fail,
    find_object,
    usable,
)

READS = {"role": QUERIES["role"], "binding": QUERIES["binding"]}


def _granted(rules: Json) -> set[str]:
    """Each ``verb resource`` (``verb group/resource`` outside the core group) a Role's rules
    grant; a wildcard stays a wildcard."""
    out: set[str] = set()
    for rule in rules if isinstance(rules, list) else []:
        groups = dig(rule, "apiGroups") or []
        for group in groups if isinstance(groups, list) else [groups]:
            for resource in dig(rule, "resources") or []:
                name = resource if group == "" else f"{group}/{resource}"
                verbs = dig(rule, "verbs") or []
                out.update(f"{v} {name}" for v in (verbs if isinstance(verbs, list) else [verbs]))
    return out


@check("2.1", 3)
def test_2_1_role_reads_pods_only(lab: LabState) -> None:
    role = lab.read("role")
    where = T("where_role", role=f"{NAMESPACE}/{ROLE}")
    if role is None:
        fail(problem=T("role_missing", role=f"{NAMESPACE}/{ROLE}"), where=where)
    want = {f"{v} pods" for v in READ_VERBS}
    granted = _granted(role.get("rules"))
    if granted != want:
        fail(
            expected=T("grants", rights=tuple(sorted(want))),
            found=T("grants", rights=tuple(sorted(granted)) or T("nothing")),
            where=where,
        )


@check("2.2", 3)
def test_2_2_binding_gives_the_role_to_the_auditor(lab: LabState) -> None:
    binding = lab.read("binding")
    where = T("where_binding", binding=f"{NAMESPACE}/{BINDING}")
    if binding is None:
        fail(problem=T("binding_missing", binding=f"{NAMESPACE}/{BINDING}"), where=where)
    ref = binding.get("roleRef") or {}
    if (ref.get("apiGroup"), ref.get("kind"), ref.get("name")) != (RBAC_GROUP, "Role", ROLE):
        fail(
            expected=f"roleRef Role/{ROLE}",
            found=f"roleRef {ref.get('kind')}/{ref.get('name')}",
            where=where,
        )
    subjects = [s for s in binding.get("subjects") or [] if isinstance(s, dict)]
    want = ("ServiceAccount", SERVICE_ACCOUNT, NAMESPACE)
    if want not in [(s.get("kind"), s.get("name"), s.get("namespace")) for s in subjects]:
        shown = tuple(f"{s.get('kind')} {s.get('namespace')}/{s.get('name')}" for s in subjects)
        fail(
            expected=f"ServiceAccount {NAMESPACE}/{SERVICE_ACCOUNT}",
            found=T("subjects_are", subjects=shown or T("nothing")),
            where=where,
        )


def _file_role(work: Workdir) -> LineDict:
    return find_object(usable(work.objects(RBAC_FILE)), "Role", ROLE, NAMESPACE, RBAC_FILE)


def _probe(role: LineDict) -> JsonObject:
    """The file's Role as sent for the dry-run: under a name the server makes up, since the
    Role itself already exists when the step is done."""
    body = {k: v for k, v in role.items() if k in ("apiVersion", "kind", "rules")}
    body["metadata"] = {"generateName": f"{ROLE}-", "namespace": NAMESPACE}
    plain: JsonObject = json.loads(json.dumps(body, default=str))  # YAML dates as their text
    return plain


def dry_runs(work: Workdir) -> list[tuple[str, JsonObject]]:
    """The dry-run this step judges, taken with the cluster read (so a snapshot holds it)."""
    try:
        return [(NAMESPACE, _probe(_file_role(work)))]
    except CheckFailed:  # no usable rbac.yaml: 2.3 fails on the file itself
        return []


@check("2.3", 2)
def test_2_3_the_files_role_is_admitted(lab: LabState, work: Workdir) -> None:
    denial = lab.dry_run_create(NAMESPACE, _probe(_file_role(work)))
    if denial is not None:
        fail(expected=T("admitted"), found=denial.message[:300], where=RBAC_FILE)
