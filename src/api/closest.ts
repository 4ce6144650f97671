import { closest, distance } from 'fastest-levenshtein';

/**
 * "equals" for "equal": the closest of `candidates` by edit distance, when it is near enough to be the word meant
 * (at most 2 edits, or a third of the word's length for long words). Undefined when nothing is that near.
 */
export function closestWord(word: string, candidates: readonly string[]): string | undefined {
  if (candidates.length === 0) return undefined;
  const best = closest(word, candidates);
  const d = distance(word, best);
  return d > 0 && d <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}
