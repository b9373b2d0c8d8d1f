"""A report's SQLite export made N times as long: its activity rows repeated, each copy shifted in time and in
correlationId, as one long run of the same job (for the multi-GB case)."""
import shutil, sqlite3, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
shutil.copy(src, dst)
c = sqlite3.connect(dst)
span = c.execute("SELECT MAX(end) FROM OSRT_API").fetchone()[0] + 1_000_000
corr = c.execute("SELECT MAX(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] + 1
for t in ["CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
          "CUPTI_ACTIVITY_KIND_MEMSET", "OSRT_API"]:
    cols = [r[1] for r in c.execute(f"PRAGMA table_info({t})")]
    c.execute(f"CREATE TEMP TABLE base AS SELECT * FROM {t}")
    for k in range(1, n):
        sel = ", ".join(f"{col} + {k * span}" if col in ("start", "end") else
                        f"{col} + {k * corr}" if col == "correlationId" else col for col in cols)
        c.execute(f"INSERT INTO {t} ({', '.join(cols)}) SELECT {sel} FROM base")
    c.execute("DROP TABLE base")
    c.commit()
c.close()
