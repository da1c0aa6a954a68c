"""Getting in: API keys and passwords (``auth``), the access refusals (``refusals``) and the login rate limit
(``ratelimit``). What a principal may do once in is the queue layer's (queuelog/queue/principal.py)."""
