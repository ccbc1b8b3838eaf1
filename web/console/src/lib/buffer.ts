/**
 * prepend adds newer items in front of a list, newest first, and keeps at
 * most max items: the access-log tail's bounded buffer. The input arrives
 * oldest first, as the stream sends it.
 */
export function prepend<T>(list: readonly T[], arrivedOldestFirst: readonly T[], max: number): T[] {
  const out = arrivedOldestFirst.slice(-max).reverse();
  for (let i = 0; out.length < max && i < list.length; i++) out.push(list[i]);
  return out;
}
