"""The linear model every backend solves: placement rows (``placement``), GPU device rows
(``gpu_rows``), the score plugins' preference rows (``preference_rows``) and the inter-pod rules'
rows over classes and domains (``rule_rows``)."""
