"""The DP query layer: plan IR, SQL front end, rewrite rules, sensitivity, compiler."""
