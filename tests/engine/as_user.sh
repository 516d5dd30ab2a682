#!/bin/sh
# as_user.sh BIN CASE: test_malformed's CASE as a user without privileges. Root reads any
# file whatever its mode, so as root (CI) a case of a file without read permission cannot
# be made: run it as nobody (setpriv). Its binary, its scratch folder and the LSan
# suppressions file it is given are copied under a fresh folder in /tmp that nobody can
# reach and write, since the build tree may lie under a folder only root can enter (the
# file's folder is then made by the case itself, as nobody). As a user: BIN SCRATCH CASE.
set -eu
bin=$1 case=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/scratch"
if [ "$(id -u)" != 0 ]; then
  "$bin" "$work/scratch" "$case"
  exit $?
fi
if ! command -v setpriv >/dev/null; then
  echo "SKIP: running as root and no setpriv (util-linux) to run $case as nobody"
  exit 77
fi
chmod 755 "$work"
cp "$bin" "$work/"
chown nobody:nogroup "$work/scratch"
supp=$(printf '%s\n' "${LSAN_OPTIONS:-}" | sed -n 's/.*suppressions=\([^:]*\).*/\1/p')
if [ -n "$supp" ]; then
  cp "$supp" "$work/lsan.supp" && chmod 644 "$work/lsan.supp"
  LSAN_OPTIONS=$(printf '%s\n' "$LSAN_OPTIONS" | sed "s|suppressions=[^:]*|suppressions=$work/lsan.supp|")
  export LSAN_OPTIONS
fi
echo "as nobody: $(basename "$bin") $work/scratch $case"
rc=0
setpriv --reuid=nobody --regid=nogroup --clear-groups \
  "$work/$(basename "$bin")" "$work/scratch" "$case" || rc=$?
exit $rc
