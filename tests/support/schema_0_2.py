"""The schema of the store before plugins had tables of their own, frozen: SQLite core migrations 1-13
and PostgreSQL 1-8 as main had them at the hand-off (c0d12e2; release 0.2.0 as tagged stops at SQLite 10
and PostgreSQL 5, the same steps). The upgrade tests build an old store from these, so they never
depend on today's migrations. Each step is (script, compatible_from), as that release recorded it in
`schema_version`.
"""

from __future__ import annotations

# Release 0.2.0 as tagged (e659d60): how many of the steps below its stores held.
RELEASE_0_2_0_SQLITE = 10
RELEASE_0_2_0_POSTGRES = 5

SQLITE: tuple[tuple[str, int], ...] = (
    # 1
    (
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            protocol_version TEXT NOT NULL,
            client_info BLOB NOT NULL,
            client_capabilities BLOB NOT NULL,
            log_level TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_seen REAL NOT NULL
        );
        CREATE INDEX sessions_last_seen ON sessions (last_seen);
        CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            stream_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            data BLOB NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (session_id, stream_id, seq)
        ) WITHOUT ROWID;
        CREATE INDEX events_created_at ON events (created_at);
        """,
        1,
    ),
    # 2
    (
        """
        CREATE INDEX sessions_owner ON sessions (owner);
        """,
        1,
    ),
    # 3
    (
        """
        CREATE TABLE record_collections (
            tenant TEXT NOT NULL,
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            fields BLOB,
            created_at TEXT NOT NULL,
            PRIMARY KEY (tenant, name)
        ) WITHOUT ROWID;
        CREATE TABLE records (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant TEXT NOT NULL,
            collection TEXT NOT NULL,
            id TEXT NOT NULL,
            data BLOB NOT NULL,
            size INTEGER NOT NULL,
            etag TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (tenant, collection, id)
        );
        CREATE INDEX records_collection ON records (tenant, collection, seq);
        CREATE TABLE record_usage (
            tenant TEXT PRIMARY KEY,
            records INTEGER NOT NULL,
            bytes INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE record_idempotency (
            tenant TEXT NOT NULL,
            key TEXT NOT NULL,
            request_hash TEXT NOT NULL,
            response BLOB NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (tenant, key)
        ) WITHOUT ROWID;
        """,
        1,
    ),
    # 4
    (
        """
        CREATE TABLE confirmations (
            token_hash TEXT PRIMARY KEY,
            operation TEXT NOT NULL,
            params_hash TEXT NOT NULL,
            principal TEXT NOT NULL,
            session TEXT NOT NULL,
            expires_at REAL NOT NULL,
            consumed_at REAL
        ) WITHOUT ROWID;
        CREATE INDEX confirmations_expiry ON confirmations (expires_at);
        CREATE INDEX record_idempotency_age ON record_idempotency (created_at);
        """,
        1,
    ),
    # 5
    (
        """
        ALTER TABLE record_collections ADD COLUMN next_pos INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE record_collections ADD COLUMN record_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE records ADD COLUMN pos INTEGER NOT NULL DEFAULT 0;
        UPDATE records SET pos = seq;
        UPDATE record_collections SET
            next_pos = coalesce((SELECT max(r.pos) FROM records r
                                 WHERE r.tenant = record_collections.tenant
                                   AND r.collection = record_collections.name), 0),
            record_count = (SELECT count(*) FROM records r
                            WHERE r.tenant = record_collections.tenant AND r.collection = record_collections.name);
        DROP INDEX records_collection;
        CREATE UNIQUE INDEX records_position ON records (tenant, collection, pos);
        CREATE TABLE streams (
            session_id TEXT NOT NULL,
            stream_id TEXT NOT NULL,
            last_seq INTEGER NOT NULL,
            ended INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (session_id, stream_id)
        ) WITHOUT ROWID;
        INSERT INTO streams SELECT session_id, stream_id, max(seq), 0 FROM events GROUP BY session_id, stream_id;
        CREATE TABLE subscriptions (
            uri TEXT NOT NULL,
            session_id TEXT NOT NULL,
            PRIMARY KEY (uri, session_id)
        ) WITHOUT ROWID;
        CREATE INDEX subscriptions_session ON subscriptions (session_id);
        """,
        5,
    ),
    # 6
    (
        """
        CREATE TABLE replicas (
            id TEXT PRIMARY KEY,
            seen_at REAL NOT NULL
        ) WITHOUT ROWID;
        """,
        5,
    ),
    # 7
    (
        """
        CREATE TABLE tasks (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            tool TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            ttl_ms INTEGER NOT NULL,
            poll_ms INTEGER NOT NULL,
            status_message TEXT,
            input_requests BLOB NOT NULL,
            answers BLOB NOT NULL,
            result BLOB,
            error BLOB
        ) WITHOUT ROWID;
        CREATE INDEX tasks_owner ON tasks (owner, status);
        CREATE INDEX tasks_expiry ON tasks (expires_at);
        """,
        5,
    ),
    # 8
    (
        """
        CREATE TABLE executions (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            session_id TEXT,
            params BLOB NOT NULL,
            progress_current INTEGER NOT NULL,
            progress_total INTEGER,
            progress_message TEXT,
            report BLOB NOT NULL,
            rejected INTEGER NOT NULL,
            error BLOB,
            result BLOB,
            replica TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL,
            attempts INTEGER NOT NULL,
            payload BLOB,
            output BLOB
        ) WITHOUT ROWID;
        CREATE INDEX executions_owner ON executions (owner, created_at);
        CREATE INDEX executions_status ON executions (status, replica);
        CREATE INDEX executions_session ON executions (session_id);
        CREATE INDEX executions_finished ON executions (finished_at);
        """,
        5,
    ),
    # 9
    (
        """
        CREATE TABLE safety_runs (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            principal TEXT NOT NULL,
            session TEXT,
            status TEXT NOT NULL,
            steps INTEGER NOT NULL,
            started_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            ended_at REAL,
            last_action TEXT,
            reason TEXT,
            settings BLOB NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX safety_runs_status ON safety_runs (status, principal);
        CREATE TABLE safety_challenges (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            run_id TEXT NOT NULL,
            principal TEXT NOT NULL,
            tier TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL,
            code TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            decided_at REAL,
            decided_by TEXT
        ) WITHOUT ROWID;
        CREATE INDEX safety_challenges_pending ON safety_challenges (status, principal);
        CREATE TABLE safety_blocks (
            principal TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            challenge_id TEXT NOT NULL,
            reason TEXT NOT NULL,
            created_at REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE safety_approvals (
            id TEXT PRIMARY KEY,
            agent TEXT NOT NULL,
            run_id TEXT NOT NULL,
            principal TEXT NOT NULL,
            kind TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            decided_at REAL,
            decided_by TEXT,
            token_hash TEXT,
            used_at REAL
        ) WITHOUT ROWID;
        CREATE INDEX safety_approvals_principal ON safety_approvals (principal, action);
        CREATE INDEX safety_approvals_token ON safety_approvals (token_hash);
        CREATE TABLE safety_notices (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            agent TEXT NOT NULL,
            type TEXT NOT NULL,
            message TEXT NOT NULL,
            metadata BLOB NOT NULL,
            created_at REAL NOT NULL,
            cleared_at REAL,
            ref TEXT
        );
        CREATE INDEX safety_notices_agent ON safety_notices (agent, cleared_at);
        CREATE INDEX safety_notices_ref ON safety_notices (ref);
        CREATE TABLE safety_failures (
            principal TEXT NOT NULL,
            at REAL NOT NULL
        );
        CREATE INDEX safety_failures_principal ON safety_failures (principal, at);
        CREATE TABLE safety_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            agent TEXT NOT NULL,
            kind TEXT NOT NULL,
            actor TEXT NOT NULL,
            detail BLOB NOT NULL
        );
        """,
        5,
    ),
    # 10
    (
        """
        ALTER TABLE executions ADD COLUMN principal TEXT;
        CREATE INDEX executions_principal ON executions (owner, principal, created_at, id);
        """,
        5,
    ),
    # 11
    (
        """
        CREATE TABLE revoked_tokens (
            token_hash TEXT PRIMARY KEY,
            expires_at REAL NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX revoked_tokens_expiry ON revoked_tokens (expires_at);
        """,
        5,
    ),
    # 12
    (
        """
        CREATE TABLE principals (
            principal TEXT PRIMARY KEY,
            subject TEXT NOT NULL,
            tenant TEXT,
            seen_at REAL NOT NULL
        ) WITHOUT ROWID;
        """,
        5,
    ),
    # 13
    (
        """
        CREATE TABLE execution_parts (
            execution_id TEXT NOT NULL,
            part INTEGER NOT NULL,
            data BLOB NOT NULL,
            PRIMARY KEY (execution_id, part)
        );
        """,
        5,
    ),
)

POSTGRES: tuple[tuple[str, int], ...] = (
    # 1
    (
        """
        CREATE TABLE sessions (
            id TEXT COLLATE "C" PRIMARY KEY,
            owner TEXT COLLATE "C" NOT NULL,
            protocol_version TEXT NOT NULL,
            client_info BYTEA NOT NULL,
            client_capabilities BYTEA NOT NULL,
            log_level TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX sessions_owner ON sessions (owner);
        CREATE INDEX sessions_last_seen ON sessions (last_seen);
        CREATE TABLE streams (
            session_id TEXT COLLATE "C" NOT NULL,
            stream_id TEXT COLLATE "C" NOT NULL,
            last_seq BIGINT NOT NULL,
            ended BOOLEAN NOT NULL DEFAULT FALSE,
            PRIMARY KEY (session_id, stream_id)
        );
        CREATE TABLE events (
            session_id TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            stream_id TEXT COLLATE "C" NOT NULL,
            seq BIGINT NOT NULL,
            data BYTEA NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (session_id, stream_id, seq)
        );
        CREATE INDEX events_created_at ON events (created_at);
        CREATE TABLE subscriptions (
            uri TEXT COLLATE "C" NOT NULL,
            session_id TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (uri, session_id)
        );
        CREATE INDEX subscriptions_session ON subscriptions (session_id);
        CREATE TABLE record_collections (
            tenant TEXT COLLATE "C" NOT NULL,
            name TEXT COLLATE "C" NOT NULL,
            description TEXT NOT NULL,
            fields JSONB,
            created_at TEXT COLLATE "C" NOT NULL,
            next_pos BIGINT NOT NULL DEFAULT 0,
            record_count BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, name)
        );
        CREATE TABLE records (
            tenant TEXT COLLATE "C" NOT NULL,
            collection TEXT COLLATE "C" NOT NULL,
            pos BIGINT NOT NULL,
            id TEXT COLLATE "C" NOT NULL,
            data JSONB NOT NULL,
            size INTEGER NOT NULL,
            etag TEXT COLLATE "C" NOT NULL,
            created_at TEXT COLLATE "C" NOT NULL,
            updated_at TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (tenant, collection, pos),
            UNIQUE (tenant, collection, id)
        );
        CREATE INDEX records_data ON records USING gin (data jsonb_path_ops);
        CREATE TABLE record_usage (
            tenant TEXT COLLATE "C" PRIMARY KEY,
            records BIGINT NOT NULL,
            bytes BIGINT NOT NULL
        );
        CREATE TABLE record_idempotency (
            tenant TEXT COLLATE "C" NOT NULL,
            key TEXT COLLATE "C" NOT NULL,
            request_hash TEXT NOT NULL,
            response BYTEA NOT NULL,
            created_at TEXT COLLATE "C" NOT NULL,
            PRIMARY KEY (tenant, key)
        );
        CREATE INDEX record_idempotency_age ON record_idempotency (created_at);
        CREATE TABLE confirmations (
            token_hash TEXT COLLATE "C" PRIMARY KEY,
            operation TEXT NOT NULL,
            params_hash TEXT NOT NULL,
            principal TEXT NOT NULL,
            session TEXT NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            consumed_at DOUBLE PRECISION
        );
        CREATE INDEX confirmations_expiry ON confirmations (expires_at);
        CREATE TABLE signals (
            id BIGSERIAL PRIMARY KEY,
            origin TEXT NOT NULL,
            kind TEXT NOT NULL,
            session_id TEXT NOT NULL,
            target TEXT NOT NULL,
            payload BYTEA NOT NULL,
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX signals_created_at ON signals (created_at);
        CREATE TABLE replicas (
            id TEXT PRIMARY KEY,
            seen_at DOUBLE PRECISION NOT NULL
        );
        """,
        1,
    ),
    # 2
    (
        """
        CREATE TABLE tasks (
            id TEXT COLLATE "C" PRIMARY KEY,
            owner TEXT COLLATE "C" NOT NULL,
            tool TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            ttl_ms BIGINT NOT NULL,
            poll_ms BIGINT NOT NULL,
            status_message TEXT,
            input_requests BYTEA NOT NULL,
            answers BYTEA NOT NULL,
            result BYTEA,
            error BYTEA
        );
        CREATE INDEX tasks_owner ON tasks (owner, status);
        CREATE INDEX tasks_expiry ON tasks (expires_at);
        """,
        1,
    ),
    # 3
    (
        """
        CREATE TABLE executions (
            id TEXT COLLATE "C" PRIMARY KEY,
            owner TEXT COLLATE "C" NOT NULL,
            kind TEXT NOT NULL,
            status TEXT NOT NULL,
            session_id TEXT,
            params BYTEA NOT NULL,
            progress_current BIGINT NOT NULL,
            progress_total BIGINT,
            progress_message TEXT,
            report BYTEA NOT NULL,
            rejected BIGINT NOT NULL,
            error BYTEA,
            result BYTEA,
            replica TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            started_at DOUBLE PRECISION,
            finished_at DOUBLE PRECISION,
            attempts BIGINT NOT NULL,
            payload BYTEA,
            output BYTEA
        );
        CREATE INDEX executions_owner ON executions (owner, created_at);
        CREATE INDEX executions_status ON executions (status, replica);
        CREATE INDEX executions_session ON executions (session_id);
        CREATE INDEX executions_finished ON executions (finished_at);
        """,
        1,
    ),
    # 4
    (
        """
        CREATE TABLE safety_runs (
            id TEXT COLLATE "C" PRIMARY KEY,
            agent TEXT NOT NULL,
            principal TEXT COLLATE "C" NOT NULL,
            session TEXT,
            status TEXT NOT NULL,
            steps BIGINT NOT NULL,
            started_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION,
            last_action TEXT,
            reason TEXT,
            settings BYTEA NOT NULL
        );
        CREATE INDEX safety_runs_status ON safety_runs (status, principal);
        CREATE TABLE safety_challenges (
            id TEXT COLLATE "C" PRIMARY KEY,
            agent TEXT NOT NULL,
            run_id TEXT NOT NULL,
            principal TEXT COLLATE "C" NOT NULL,
            tier TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL,
            code TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            decided_at DOUBLE PRECISION,
            decided_by TEXT
        );
        CREATE INDEX safety_challenges_pending ON safety_challenges (status, principal);
        CREATE TABLE safety_blocks (
            principal TEXT COLLATE "C" PRIMARY KEY,
            agent TEXT NOT NULL,
            challenge_id TEXT NOT NULL,
            reason TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL
        );
        CREATE TABLE safety_approvals (
            id TEXT COLLATE "C" PRIMARY KEY,
            agent TEXT NOT NULL,
            run_id TEXT NOT NULL,
            principal TEXT COLLATE "C" NOT NULL,
            kind TEXT NOT NULL,
            action TEXT NOT NULL,
            reason TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            decided_at DOUBLE PRECISION,
            decided_by TEXT,
            token_hash TEXT,
            used_at DOUBLE PRECISION
        );
        CREATE INDEX safety_approvals_principal ON safety_approvals (principal, action);
        CREATE INDEX safety_approvals_token ON safety_approvals (token_hash);
        CREATE TABLE safety_notices (
            id BIGSERIAL PRIMARY KEY,
            agent TEXT COLLATE "C" NOT NULL,
            type TEXT NOT NULL,
            message TEXT NOT NULL,
            metadata BYTEA NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            cleared_at DOUBLE PRECISION,
            ref TEXT
        );
        CREATE INDEX safety_notices_agent ON safety_notices (agent, cleared_at);
        CREATE INDEX safety_notices_ref ON safety_notices (ref);
        CREATE TABLE safety_failures (
            principal TEXT COLLATE "C" NOT NULL,
            at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX safety_failures_principal ON safety_failures (principal, at);
        CREATE TABLE safety_events (
            id BIGSERIAL PRIMARY KEY,
            at DOUBLE PRECISION NOT NULL,
            agent TEXT NOT NULL,
            kind TEXT NOT NULL,
            actor TEXT NOT NULL,
            detail BYTEA NOT NULL
        );
        """,
        1,
    ),
    # 5
    (
        """
        ALTER TABLE executions ADD COLUMN principal TEXT COLLATE "C";
        CREATE INDEX executions_principal ON executions (owner, principal, created_at, id);
        """,
        1,
    ),
    # 6
    (
        """
        CREATE TABLE revoked_tokens (
            token_hash TEXT COLLATE "C" PRIMARY KEY,
            expires_at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX revoked_tokens_expiry ON revoked_tokens (expires_at);
        """,
        1,
    ),
    # 7
    (
        """
        CREATE TABLE principals (
            principal TEXT COLLATE "C" PRIMARY KEY,
            subject TEXT NOT NULL,
            tenant TEXT,
            seen_at DOUBLE PRECISION NOT NULL
        );
        """,
        1,
    ),
    # 8
    (
        """
        CREATE TABLE execution_parts (
            execution_id TEXT COLLATE "C" NOT NULL,
            part INTEGER NOT NULL,
            data BYTEA NOT NULL,
            PRIMARY KEY (execution_id, part)
        );
        """,
        1,
    ),
)
