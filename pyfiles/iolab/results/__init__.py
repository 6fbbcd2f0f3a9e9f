"""The results database: schema, index, publish, query, check, and storing a run into it."""
