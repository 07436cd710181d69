-- v006: vLLM queue gauges (vllm:num_requests_waiting, vllm:num_requests_running) per serving
-- pod and model, beside the token counters: the autoscaling advice replays the queue.
ALTER TABLE token_samples ADD COLUMN IF NOT EXISTS num_requests_waiting DOUBLE;
ALTER TABLE token_samples ADD COLUMN IF NOT EXISTS num_requests_running DOUBLE;
