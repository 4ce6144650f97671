/**
 * Query parameters as kube-apiserver converts them (apimachinery's runtime/conversion.go). A parameter may be
 * given more than once; like Go's url.Values, the first value counts.
 */
export type QueryValue = string | readonly string[] | null | undefined;

function first(value: QueryValue): string | undefined {
  if (value === null || value === undefined) return undefined;
  return typeof value === 'string' ? value : value[0];
}

/**
 * Convert_Slice_string_To_bool, used for every boolean option (watch, allowWatchBookmarks, sendInitialEvents, force,
 * orphanDependents, follow, previous, timestamps, stdin, stdout, stderr, tty, …): absent, `0`, or `false` in any case
 * is false; anything else is true — `True` (the Python client), `yes`, and an empty value (`?watch`) included.
 */
export function queryBool(value: QueryValue): boolean {
  const v = first(value);
  if (v === undefined) return false;
  return !(v === '0' || v.toLowerCase() === 'false');
}

/** The same conversion into an optional bool (Convert_Slice_string_To_Pointer_bool): absent stays unset. */
export function optionalQueryBool(value: QueryValue): boolean | undefined {
  return first(value) === undefined ? undefined : queryBool(value);
}

/** strconv.ParseBool: 1, t, T, TRUE, true, True and 0, f, F, FALSE, false, False; anything else is no bool. */
export function goParseBool(value: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  return undefined;
}
