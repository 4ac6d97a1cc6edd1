"""The results store: every reviewed entry and run, kept in SQLite (default: results.db in the data
directory) or PostgreSQL (a postgresql:// URL), for listing and comparing systems.

  db.py          which database, the engine, write transactions that retry what other processes lock
  models.py      the tables: systems, entries, runs, evals, findings, schema_version
  migrations.py  schema versions and upgrades (on an engine; db.open_store runs them)
  unit_facts.py  a run's progress unit and quality metrics as stored, an entry's from its runs
  records.py     a review (trainclock.review) as column values
  importer.py    import_paths / import_run / import_entries: idempotent, one transaction per entry
  queries.py     filtered lists, entries by id or name, one entry in full
  quality.py     evaluations by metric, the best of each in its direction
  compare.py     throughput per accelerator, speedup, scaling efficiency, best quality
  render.py      the terminal tables

`trainclock run` calls `importer.import_run(log_path, db_url)` when a run ends.
"""
