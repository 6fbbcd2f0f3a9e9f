"""What a measurement is: the sample and its store, the metrics, limits, validity and host flags,
and the statistics that compare them."""
