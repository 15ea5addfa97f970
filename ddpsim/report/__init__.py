"""The files ``ddpsim run`` writes: the summary (markdown and JSON), CSV tables, PNG plots and
Chrome/Kineto traces that open in Perfetto and HTA."""
