"""A text-to-SQL benchmark that looks like a user's own data: a hospital network's SQLite database
(nine related tables, ~10,000 rows), 567 questions with gold SQL in paraphrase groups,
train/dev/test by group, test entities never named in train, and ~38% of test questions whose SQL
structure never occurs in train; with a template-retrieval baseline to beat.

    python -m benchmarks.text2sql --build runs/text2sql          # database, questions, tasks (BYO synth)
    python -m benchmarks.text2sql --data runs/text2sql --baseline
    python -m benchmarks.text2sql --data runs/text2sql --baseline --agent-store runs/text2sql/eval

Modules: ``world`` (the database and the entity partition), ``families`` (query shapes and their
hand-written phrasings), ``questions`` (groups, splits, the guarantees checked), ``structure``
(SQL with literals abstracted), ``gazetteer`` (database values named in a text), ``baseline``
(nearest training question, its SQL refilled), ``scoring`` (tables by tier and split kind),
``build`` (files on disk through ``trajforge synth``). See ``__main__`` for the training run.
"""
