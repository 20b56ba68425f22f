//! The persisted schema, statistics and renderers (see issues 6, 7, 8).
