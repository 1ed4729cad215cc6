/** Command-line argument parsers shared by the benchmarks (commander). */
import { InvalidArgumentError } from 'commander';

/** A parser of whole numbers of at least `min`. */
export const wholeFrom =
  (min: number) =>
  (raw: string): number => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min)
      throw new InvalidArgumentError(
        min === 1 ? `${raw} is not a positive whole number` : `${raw} is not a whole number ≥ ${min}`,
      );
    return n;
  };

/** A positive whole number. */
export const whole = wholeFrom(1);
