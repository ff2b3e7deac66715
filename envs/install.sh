#!/usr/bin/env bash
# Install the project's pinned environment into a virtual environment: the one script the Docker image runs
# (docker/Dockerfile) and CI runs natively (tests/infra/test_docker.py).
#
#   envs/install.sh [--venv DIR] [--python PY] [--variant default|cu118|cu128] [--steps deps,project,kernels]
#                   [--no-editable] [--dry-run] [--print]
#
#   --variant default  envs/requirements.txt + envs/constraints.txt, exactly what `bash tasks.sh setup` installs
#   --variant cu118    the same, with torch/torchvision from envs/requirements-cu118.txt (the image's torch)
#   --variant cu128    the same, with envs/requirements-cu128.txt (the CUDA 12.x image)
#   --steps            deps: the pinned packages; project: `hot` itself (--no-deps); kernels: the hot-kernels
#                      CUDA extension (pip install --no-build-isolation ./kernels; needs nvcc, honours
#                      TORCH_CUDA_ARCH_LIST and MAX_JOBS)
#   --dry-run          resolve with `pip install --dry-run` (nothing installed; the venv must already exist)
#   --print            write the generated requirement files, print them and the commands, install nothing
#
# One source of truth: versions live only in envs/requirements.txt and envs/constraints.txt; a variant file lists
# only the packages it replaces and, on "#@drop" lines, the constraint patterns (Python regexes matched against the
# normalised name) that depend on the replaced torch build. Everything else keeps its locked version.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=.venv PY=${PYTHON:-python3} VARIANT=default STEPS=deps,project EDITABLE=1 DRY=0 PRINT=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) VENV=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    --variant) VARIANT=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --no-editable) EDITABLE=0; shift ;;
    --dry-run) DRY=1; shift ;;
    --print) PRINT=1; shift ;;
    -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
cd "$ROOT"

REQ=envs/requirements.txt CONS=envs/constraints.txt
for f in "$REQ" "$CONS"; do [ -f "$f" ] || { echo "install.sh: missing $f" >&2; exit 2; }; done
OVERRIDE=
if [ "$VARIANT" != default ]; then
  OVERRIDE=envs/requirements-$VARIANT.txt
  [ -f "$OVERRIDE" ] || { echo "install.sh: unknown variant '$VARIANT' (no $OVERRIDE)" >&2; exit 2; }
fi
for step in ${STEPS//,/ }; do
  case "$step" in deps|project|kernels) ;; *) echo "install.sh: unknown step '$step'" >&2; exit 2 ;; esac
done
has_step() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# The requirement set: the lock as it is, or the lock with a variant's replacements.
GEN=$(mktemp -d "${TMPDIR:-/tmp}/hot-install.XXXXXX")
trap 'rm -rf "$GEN"' EXIT
"$PY" - "$REQ" "$CONS" "$OVERRIDE" "$GEN" <<'PY'
import re
import sys
from pathlib import Path

req, cons, override, out = sys.argv[1:5]
out = Path(out)


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def name_of(line: str) -> str | None:
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-"):
        return None
    m = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
    if m is None:
        raise SystemExit(f"install.sh: cannot read the requirement line {line!r}")
    return norm(m.group(0))


req_lines = Path(req).read_text().splitlines()
cons_lines = Path(cons).read_text().splitlines()
replaced: set[str] = set()
drop: list[re.Pattern[str]] = []
extra: list[str] = []
if override:
    for line in Path(override).read_text().splitlines():
        if line.startswith("#@drop"):
            drop += [re.compile(p) for p in line.split()[1:]]
        elif (name := name_of(line)) is not None:
            replaced.add(name)
            extra.append(line.strip())
        elif line.strip().startswith("-"):
            extra.append(line.strip())
    unknown = replaced - {name_of(x) for x in req_lines}
    if unknown:
        raise SystemExit(f"install.sh: {override} replaces {sorted(unknown)}, which envs/requirements.txt does not pin")


def keep_req(line: str) -> bool:
    return name_of(line) not in replaced


def keep_cons(line: str) -> bool:
    name = name_of(line)
    return name is None or (name not in replaced and not any(p.fullmatch(name) for p in drop))


kept_req = [x for x in req_lines if keep_req(x)]
kept_cons = [x for x in cons_lines if keep_cons(x)]
(out / "requirements.txt").write_text("\n".join([*kept_req, *extra]) + "\n")
(out / "constraints.txt").write_text("\n".join(kept_cons) + "\n")
dropped = sorted({n for x in cons_lines if (n := name_of(x)) and not keep_cons(x)})
(out / "dropped.txt").write_text("\n".join(dropped) + ("\n" if dropped else ""))
PY

PIP=("$VENV/bin/python" -m pip)
DEPS=("${PIP[@]}" install -r "$GEN/requirements.txt" -c "$GEN/constraints.txt")
if [ "$EDITABLE" = 1 ]; then PROJECT=("${PIP[@]}" install --no-deps -e "$ROOT")
else PROJECT=("${PIP[@]}" install --no-deps "$ROOT"); fi
KERNELS=("${PIP[@]}" install --no-build-isolation "$ROOT/kernels")
[ "$DRY" = 1 ] && DEPS+=(--dry-run) && PROJECT+=(--dry-run) && KERNELS+=(--dry-run)

if [ "$PRINT" = 1 ]; then
  echo "# variant: $VARIANT${OVERRIDE:+ ($OVERRIDE)}"
  echo "# constraints dropped for the variant: $(tr '\n' ' ' < "$GEN/dropped.txt")"
  echo "# --- requirements"; cat "$GEN/requirements.txt"
  [ -x "$VENV/bin/python" ] || echo "$PY -m venv $VENV"
  echo "${PIP[*]} install --upgrade pip"
  has_step deps && echo "${DEPS[*]}"
  has_step project && echo "${PROJECT[*]}"
  has_step kernels && echo "TORCH_CUDA_ARCH_LIST='${TORCH_CUDA_ARCH_LIST:-8.0;8.6;8.9;9.0}' MAX_JOBS=${MAX_JOBS:-} ${KERNELS[*]}"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  [ "$DRY" = 1 ] && { echo "install.sh: --dry-run needs an existing venv at $VENV" >&2; exit 2; }
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "install.sh: Python >= 3.11 is needed as '$PY' (--python PY)" >&2; exit 2; }
  "$PY" -m venv "$VENV"
  "${PIP[@]}" install -q --upgrade pip
fi
if has_step deps; then "${DEPS[@]}"; fi
if has_step project; then "${PROJECT[@]}"; fi
if has_step kernels; then
  [ -f "$ROOT/kernels/setup.py" ] || { echo "install.sh: no kernels/setup.py" >&2; exit 2; }
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-8.0;8.6;8.9;9.0}
  export MAX_JOBS=${MAX_JOBS:-$(nproc)}
  "${KERNELS[@]}"
fi
