"""The parts of ``rewriter.passes.check_types``: row-level expressions that must not fail
on particular values, one concern per module.

- ``kinds``: the kinds of values told apart (number, text, date, …) and the memo of one
  check;
- ``constant_arguments``: function arguments an engine validates only on the rows that
  reach the function (substring's start and length, date_trunc's unit, round's digits,
  LIKE patterns);
- ``literals``: quoted and number literals, checked before the query runs;
- ``moments``: dates and timestamps (arithmetic, EXTRACT, date_trunc);
- ``casts``: the casts that every value of a kind fits;
- ``text``: the functions and operators of a text;
- ``comparisons``: values compared, or chosen among, as both engines convert them;
- ``zoned``, ``instants``: timestamps with time zone compared as instants, and a date or
  timestamp compared with a constant instant as PostgreSQL compares them;
- ``number_types``: the number type of a value on both engines, and constants respelled
  as DOUBLE;
- ``decimal_digits``: numbers that one DECIMAL holds exactly.
"""
