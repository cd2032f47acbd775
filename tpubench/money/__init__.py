"""Money: price tables and costs (per token, per image, energy, carbon, TCO tiers). Pure functions over
result rows; never imports a framework. Budgets, which size fleets on these costs, are tpubench.budget."""
