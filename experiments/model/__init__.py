"""The Transformer from registry names (plain torch), REINFORCE, attention statistics, compiling."""
