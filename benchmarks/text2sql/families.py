"""The question families: one logical query shape each, its gold SQL and hand-written phrasings.

A ``Family`` is a parameterised query (``{city}``, ``{n}``...) with 3-4 wordings written by hand
(different sentences, not one template with a word swapped). Binding its slots gives one logical
query — a *paraphrase group* of 2-4 questions with one gold SQL (``questions.py``).

``held`` says where a family's groups may go:

* ``shared``: every split, each with its own entities (train learns the shape; dev/test ask it
  about entities train never mentions);
* ``test``: the test split only — whole structure families held out, so their SQL structure
  (``structure.py``) never occurs in train: nested NOT EXISTS over a join, HAVING on an average,
  date arithmetic against a subquery, percentages, self-joins for readmissions...; each is built
  from pieces the shared families teach (joins, NOT EXISTS, HAVING, julianday, subqueries);
* ``dev``: the dev split only (held-out shapes for model selection, none of them test's).

Entity slots are named by their kind in ``world.ENTITY_COLUMNS``; number slots list their values.
Questions show specialties and diagnoses in lower case, as people type them ("cardiology"), while
the database holds "Cardiology": reading the values is part of the task.
"""

from __future__ import annotations

from dataclasses import dataclass, field

JOIN_HOSPITAL = ("JOIN doctors d ON d.id = a.doctor_id JOIN departments dp ON dp.id = d.department_id "
                 "JOIN hospitals h ON h.id = dp.hospital_id")
"""From admissions ``a`` to the hospital ``h`` of its doctor's department."""


@dataclass(frozen=True)
class Family:
    """One query shape: gold SQL with slots, and the hand-written ways to ask it."""

    name: str
    held: str
    """``shared``, ``test`` or ``dev`` (see the module docstring)."""
    sql: str
    """Gold SQL; each ``{slot}`` is filled with an entity or number (entity values come quoted)."""
    phrasings: tuple[str, ...]
    """Hand-written questions; each names every slot."""
    numbers: dict[str, tuple] = field(default_factory=dict)
    """Number slots and the values they take (every other ``{slot}`` is an entity)."""
    rank: str | None = None
    """For a top-k question: SQL giving the ordering value of the first k+1 rows (a tie at the
    cut makes two right answers, so such bindings are skipped)."""
    nonzero: bool = False
    """Skip bindings whose answer is 0 (a count about nothing is a poor question)."""


F = Family
FAMILIES: tuple[Family, ...] = (
    # ---- one table ---------------------------------------------------------------------------
    F("patients_in_city", "shared", "SELECT COUNT(*) FROM patients WHERE city = '{city}'", (
        "How many patients live in {city}?",
        "What is the number of registered patients whose home city is {city}?",
        "Count the patients from {city}.",
        "How many of our patients come from {city}?")),
    F("hospital_in_city", "shared", "SELECT name FROM hospitals WHERE city = '{city}'", (
        "Which hospital is located in {city}?",
        "What is the name of the hospital the network runs in {city}?",
        "Name the hospital in {city}.")),
    F("hospital_beds", "shared", "SELECT beds FROM hospitals WHERE name = '{hospital}'", (
        "How many beds does {hospital} have?",
        "What is the bed capacity of {hospital}?",
        "Tell me the number of beds at {hospital}.")),
    F("diagnosis_code", "shared", "SELECT code FROM diagnoses WHERE name = '{diagnosis}'", (
        "What is the diagnosis code for {diagnosis}?",
        "Which code is {diagnosis} recorded under?",
        "Give the code used for {diagnosis} diagnoses.")),
    F("class_prices", "shared",
      "SELECT name, unit_price FROM medications WHERE drug_class = '{drug_class}' ORDER BY unit_price DESC", (
          "List the {drug_class} medications with their unit prices, most expensive first.",
          "Show every {drug_class} drug and what one unit costs, from the priciest down.",
          "What do the {drug_class} medications cost per unit? Sort them from the highest price to the lowest.")),
    F("born_before", "shared",
      "SELECT COUNT(*) FROM patients WHERE city = '{city}' AND birth_date < '{year}-01-01'", (
          "How many patients from {city} were born before {year}?",
          "Count the {city} patients born earlier than {year}.",
          "What number of patients living in {city} have a birth date before the year {year}?"),
      numbers={"year": (1950, 1960, 1970, 1980, 1990, 2000)}, nonzero=True),
    F("women_born_before", "test",
      "SELECT COUNT(*) FROM patients WHERE city = '{city}' AND sex = 'F' AND birth_date < '{year}-01-01'", (
          "How many women from {city} were born before {year}?",
          "Count the female patients living in {city} with a birth date before {year}.",
          "What is the number of female patients from {city} born earlier than {year}?"),
      numbers={"year": (1950, 1960, 1970, 1980, 1990, 2000)}, nonzero=True),
    F("class_price_between", "test",
      "SELECT name FROM medications WHERE drug_class = '{drug_class}' AND unit_price BETWEEN {low} AND {high}", (
          "Which {drug_class} medications cost between {low} and {high} per unit?",
          "List the {drug_class} drugs with a unit price from {low} to {high}.",
          "Name the {drug_class} medications priced between {low} and {high} a unit."),
      numbers={"low": (0.1, 0.2, 0.5, 1), "high": (2, 5, 10)}),
    # ---- joins, grouping, ordering ------------------------------------------------------------
    F("doctor_admissions", "shared",
      "SELECT COUNT(*) FROM admissions a JOIN doctors d ON d.id = a.doctor_id WHERE d.name = '{doctor}'", (
          "How many admissions has Dr. {doctor} handled?",
          "Count the admissions for which {doctor} was the responsible doctor.",
          "What is the total number of admissions under Dr. {doctor}?"), nonzero=True),
    F("patient_admissions", "shared",
      "SELECT COUNT(*) FROM admissions a JOIN patients p ON p.id = a.patient_id WHERE p.name = '{patient}'", (
          "How many times has {patient} been admitted?",
          "Count the hospital admissions of the patient {patient}.",
          "What is the number of admissions recorded for {patient}?"), nonzero=True),
    F("specialists_at_hospital", "shared",
      "SELECT COUNT(*) FROM doctors d JOIN departments dp ON dp.id = d.department_id "
      "JOIN hospitals h ON h.id = dp.hospital_id WHERE dp.specialty = '{specialty}' AND h.name = '{hospital}'", (
          "How many {specialty} doctors work at {hospital}?",
          "Count the doctors in the {specialty} department of {hospital}.",
          "What is the number of doctors {hospital} employs in {specialty}?"), nonzero=True),
    F("insured_in_city", "shared",
      "SELECT COUNT(*) FROM patients p JOIN insurers i ON i.id = p.insurer_id "
      "WHERE i.name = '{insurer}' AND p.city = '{city}'", (
          "How many patients in {city} are insured by {insurer}?",
          "Count the {insurer} policyholders among our patients from {city}.",
          "What number of {city} patients have {insurer} as their insurer?"), nonzero=True),
    F("diagnosis_avg_cost", "shared",
      "SELECT ROUND(AVG(a.cost), 2) FROM admissions a JOIN diagnoses g ON g.id = a.diagnosis_id "
      "WHERE g.name = '{diagnosis}'", (
          "What is the average cost of an admission for {diagnosis}, to the cent?",
          "On average, how much does a {diagnosis} admission cost? Round to two decimals.",
          "Give the mean admission cost for patients diagnosed with {diagnosis}, rounded to cents.")),
    F("hospital_kinds", "shared",
      f"SELECT a.kind, COUNT(*) FROM admissions a {JOIN_HOSPITAL} WHERE h.name = '{{hospital}}' GROUP BY a.kind", (
          "How many admissions of each kind did {hospital} have?",
          "Break down the admissions at {hospital} by admission kind, with a count for each.",
          "For {hospital}, give the number of admissions per admission type.")),
    F("longest_serving", "shared",
      "SELECT d.name FROM doctors d JOIN departments dp ON dp.id = d.department_id "
      "WHERE dp.specialty = '{specialty}' ORDER BY d.hired_on LIMIT 1", (
          "Who is the longest-serving {specialty} doctor in the network?",
          "Which {specialty} doctor was hired first?",
          "Name the {specialty} doctor with the earliest hire date."),
      rank="SELECT d.hired_on FROM doctors d JOIN departments dp ON dp.id = d.department_id "
           "WHERE dp.specialty = '{specialty}' ORDER BY d.hired_on LIMIT 2"),
    F("diagnosis_drugs", "shared",
      "SELECT DISTINCT m.name FROM prescriptions r JOIN medications m ON m.id = r.medication_id "
      "JOIN admissions a ON a.id = r.admission_id JOIN diagnoses g ON g.id = a.diagnosis_id "
      "WHERE g.name = '{diagnosis}'", (
          "Which medications have been prescribed to patients admitted with {diagnosis}?",
          "List the distinct drugs given during {diagnosis} admissions.",
          "What medications were prescribed during stays for {diagnosis}?")),
    F("drug_days", "shared",
      "SELECT SUM(r.days) FROM prescriptions r JOIN medications m ON m.id = r.medication_id "
      "WHERE m.name = '{drug}'", (
          "How many days of {drug} have been prescribed in total?",
          "What is the total number of prescription days for {drug}?",
          "Add up the days of all {drug} prescriptions.")),
    F("specialty_by_year", "shared",
      "SELECT strftime('%Y', a.admitted_on) AS year, COUNT(*) FROM admissions a "
      "JOIN doctors d ON d.id = a.doctor_id JOIN departments dp ON dp.id = d.department_id "
      "WHERE dp.specialty = '{specialty}' GROUP BY year ORDER BY year", (
          "How many {specialty} admissions were there each year?",
          "Give the yearly number of admissions to {specialty}, oldest year first.",
          "Per year, count the admissions handled by {specialty} doctors, in year order.")),
    F("hospital_max_stay", "shared",
      f"SELECT MAX(julianday(a.discharged_on) - julianday(a.admitted_on)) FROM admissions a {JOIN_HOSPITAL} "
      "WHERE h.name = '{hospital}'", (
          "What is the longest stay, in days, at {hospital}?",
          "How many days did the longest admission at {hospital} last?",
          "Find the maximum length of stay in days among admissions at {hospital}.")),
    F("insurer_year_cost", "shared",
      "SELECT ROUND(SUM(a.cost), 2) FROM admissions a JOIN patients p ON p.id = a.patient_id "
      "JOIN insurers i ON i.id = p.insurer_id WHERE i.name = '{insurer}' AND strftime('%Y', a.admitted_on) = '{year}'", (
          "What was the total admission cost for {insurer} patients in {year}?",
          "How much did the admissions of patients insured by {insurer} cost altogether in {year}?",
          "Sum the costs of {year} admissions whose patient is covered by {insurer}."),
      numbers={"year": (2021, 2022, 2023, 2024)}),
    F("busiest_doctor", "shared",
      f"SELECT d.name FROM admissions a {JOIN_HOSPITAL} WHERE h.name = '{{hospital}}' "
      "GROUP BY d.id, d.name ORDER BY COUNT(*) DESC LIMIT 1", (
          "Which doctor at {hospital} has handled the most admissions?",
          "Who is the busiest doctor at {hospital} by number of admissions?",
          "Name the {hospital} doctor with the highest admission count."),
      rank=f"SELECT COUNT(*) FROM admissions a {JOIN_HOSPITAL} WHERE h.name = '{{hospital}}' "
           "GROUP BY d.id ORDER BY COUNT(*) DESC LIMIT 2"),
    F("old_patients_with", "shared",
      "SELECT COUNT(*) FROM admissions a JOIN patients p ON p.id = a.patient_id JOIN diagnoses g "
      "ON g.id = a.diagnosis_id WHERE g.name = '{diagnosis}' "
      "AND (julianday(a.admitted_on) - julianday(p.birth_date)) / 365.25 >= {age}", (
          "How many {diagnosis} admissions involved patients aged {age} or older at admission?",
          "Count the admissions for {diagnosis} where the patient was at least {age} years old when admitted.",
          "Among {diagnosis} admissions, how many patients were {age} or over on the day of admission?"),
      numbers={"age": (40, 50, 60, 65, 70, 80)}, nonzero=True),
    F("specialty_hospitals", "test",
      "SELECT h.name, COUNT(*) FROM hospitals h JOIN departments dp ON dp.hospital_id = h.id "
      "JOIN doctors d ON d.department_id = dp.id WHERE dp.specialty = '{specialty}' GROUP BY h.name", (
          "For each hospital with a {specialty} department, how many {specialty} doctors does it employ?",
          "List the hospitals that have {specialty} doctors, with the number of them at each.",
          "How are the {specialty} doctors spread over the hospitals? Give each hospital and its count.")),
    F("emergency_patients", "test",
      "SELECT DISTINCT p.name FROM patients p JOIN admissions a ON a.patient_id = p.id "
      "JOIN doctors d ON d.id = a.doctor_id WHERE d.name = '{doctor}' AND a.kind = 'emergency'", (
          "Which patients did Dr. {doctor} treat after an emergency admission?",
          "List the patients admitted as emergencies under {doctor}.",
          "Name every patient whose emergency admission was handled by Dr. {doctor}.")),
    F("diagnosis_avg_stay", "test",
      "SELECT ROUND(AVG(julianday(a.discharged_on) - julianday(a.admitted_on)), 1) FROM admissions a "
      "JOIN diagnoses g ON g.id = a.diagnosis_id WHERE g.name = '{diagnosis}' AND a.discharged_on IS NOT NULL", (
          "What is the average length of stay in days for {diagnosis} admissions, rounded to one decimal?",
          "On average, how many days do {diagnosis} patients stay in hospital? Round to one decimal.",
          "Give the mean stay in days, to one decimal, of discharged patients admitted with {diagnosis}.")),
    F("emergency_share", "test",
      f"SELECT ROUND(100.0 * SUM(a.kind = 'emergency') / COUNT(*), 1) FROM admissions a {JOIN_HOSPITAL} "
      "WHERE h.name = '{hospital}'", (
          "What percentage of the admissions at {hospital} were emergencies? Round to one decimal.",
          "Of all admissions to {hospital}, what share in percent came in as emergencies (one decimal)?",
          "Give the emergency admission rate at {hospital} as a percentage with one decimal.")),
    F("readmitted", "test",
      "SELECT COUNT(DISTINCT a1.patient_id) FROM admissions a1 JOIN admissions a2 ON a2.patient_id = a1.patient_id "
      "AND a2.admitted_on > a1.discharged_on AND julianday(a2.admitted_on) - julianday(a1.discharged_on) <= {days} "
      "JOIN patients p ON p.id = a1.patient_id WHERE p.city = '{city}'", (
          "How many patients from {city} were readmitted within {days} days of a discharge?",
          "Count the {city} patients who came back to hospital no more than {days} days after being discharged.",
          "For patients living in {city}, how many had a readmission within {days} days?"),
      numbers={"days": (30, 60, 90)}, nonzero=True),
    # ---- nested, HAVING, NOT EXISTS, date arithmetic ------------------------------------------
    F("busy_specialists", "shared",
      "SELECT d.name FROM doctors d JOIN departments dp ON dp.id = d.department_id "
      "JOIN admissions a ON a.doctor_id = d.id WHERE dp.specialty = '{specialty}' "
      "GROUP BY d.id, d.name HAVING COUNT(*) > {n}", (
          "Which {specialty} doctors have handled more than {n} admissions?",
          "List the {specialty} doctors with over {n} admissions.",
          "Name the doctors in {specialty} whose admission count exceeds {n}."),
      numbers={"n": (8, 10, 12, 15, 20)}),
    F("no_transfers", "shared",
      "SELECT d.name FROM doctors d JOIN departments dp ON dp.id = d.department_id "
      "JOIN hospitals h ON h.id = dp.hospital_id WHERE h.name = '{hospital}' "
      "AND NOT EXISTS (SELECT 1 FROM admissions a WHERE a.doctor_id = d.id AND a.kind = 'transfer')", (
          "Which doctors at {hospital} have never received a transfer admission?",
          "List the {hospital} doctors with no transfer admissions at all.",
          "Name every doctor working at {hospital} who has not handled a single transfer.")),
    F("pricier_than_average", "shared",
      "SELECT name FROM medications WHERE drug_class = '{drug_class}' "
      "AND unit_price > (SELECT AVG(unit_price) FROM medications)", (
          "Which {drug_class} medications cost more per unit than the average medication?",
          "List the {drug_class} drugs priced above the mean unit price of all medications.",
          "Name the {drug_class} medications whose unit price is higher than the average over every drug.")),
    F("frequent_patients", "shared",
      "SELECT COUNT(*) FROM (SELECT a.patient_id FROM admissions a JOIN patients p ON p.id = a.patient_id "
      "WHERE p.city = '{city}' GROUP BY a.patient_id HAVING COUNT(*) >= {n})", (
          "How many patients from {city} have been admitted at least {n} times?",
          "Count the {city} patients with {n} or more admissions.",
          "What number of patients living in {city} have had no fewer than {n} hospital admissions?"),
      numbers={"n": (2, 3, 4, 5)}, nonzero=True),
    F("city_patients_with", "shared",
      "SELECT name FROM patients WHERE city = '{city}' AND id IN (SELECT a.patient_id FROM admissions a "
      "JOIN diagnoses g ON g.id = a.diagnosis_id WHERE g.name = '{diagnosis}')", (
          "Which patients from {city} have been admitted with {diagnosis}?",
          "List the {city} patients who were ever diagnosed with {diagnosis}.",
          "Name the patients living in {city} with at least one {diagnosis} admission.")),
    F("never_given_class", "test",
      "SELECT COUNT(*) FROM patients p WHERE p.city = '{city}' AND NOT EXISTS (SELECT 1 FROM admissions a "
      "JOIN prescriptions r ON r.admission_id = a.id JOIN medications m ON m.id = r.medication_id "
      "WHERE a.patient_id = p.id AND m.drug_class = '{drug_class}')", (
          "How many patients from {city} have never been prescribed a {drug_class} medication?",
          "Count the {city} patients who have not once received a {drug_class} drug.",
          "What number of patients living in {city} never got any {drug_class} prescription?"), nonzero=True),
    F("costly_hospitals", "test",
      "SELECT h.name FROM hospitals h JOIN departments dp ON dp.hospital_id = h.id "
      "JOIN doctors d ON d.department_id = dp.id JOIN admissions a ON a.doctor_id = d.id "
      "WHERE dp.specialty = '{specialty}' GROUP BY h.id, h.name HAVING AVG(a.cost) > {cost}", (
          "Which hospitals have an average {specialty} admission cost above {cost}?",
          "List the hospitals where {specialty} admissions cost more than {cost} on average.",
          "Name the hospitals whose mean cost per {specialty} admission exceeds {cost}."),
      numbers={"cost": (3000, 4000, 5000, 6000, 7000, 8000)}),
    F("longer_than_average", "test",
      f"SELECT COUNT(*) FROM admissions a {JOIN_HOSPITAL} WHERE h.name = '{{hospital}}' "
      "AND julianday(a.discharged_on) - julianday(a.admitted_on) > "
      "(SELECT AVG(julianday(discharged_on) - julianday(admitted_on)) FROM admissions)", (
          "How many admissions at {hospital} lasted longer than the network-wide average stay?",
          "Count the {hospital} admissions whose length of stay exceeds the average stay across all admissions.",
          "At {hospital}, how many stays were longer than the average length of stay over the whole network?"),
      nonzero=True),
    F("top_drug_for", "test",
      "SELECT m.name FROM prescriptions r JOIN medications m ON m.id = r.medication_id "
      "JOIN admissions a ON a.id = r.admission_id JOIN diagnoses g ON g.id = a.diagnosis_id "
      "WHERE g.name = '{diagnosis}' GROUP BY m.id, m.name ORDER BY COUNT(*) DESC LIMIT 1", (
          "Which medication is prescribed most often during {diagnosis} admissions?",
          "What is the most frequently prescribed drug for {diagnosis} patients?",
          "Name the drug with the most prescriptions in {diagnosis} stays."),
      rank="SELECT COUNT(*) FROM prescriptions r JOIN admissions a ON a.id = r.admission_id "
           "JOIN diagnoses g ON g.id = a.diagnosis_id WHERE g.name = '{diagnosis}' "
           "GROUP BY r.medication_id ORDER BY COUNT(*) DESC LIMIT 2"),
    F("idle_in_year", "dev",
      "SELECT d.name FROM doctors d JOIN departments dp ON dp.id = d.department_id WHERE dp.specialty = '{specialty}' "
      "AND d.id NOT IN (SELECT a.doctor_id FROM admissions a WHERE strftime('%Y', a.admitted_on) = '{year}')", (
          "Which {specialty} doctors had no admissions in {year}?",
          "List the {specialty} doctors who did not handle any admission during {year}.",
          "Name the doctors in {specialty} without a single admission in {year}."),
      numbers={"year": (2021, 2022, 2023, 2024)}),
    F("insurer_average_age", "dev",
      "SELECT ROUND(AVG((julianday('2025-01-01') - julianday(p.birth_date)) / 365.25), 1) FROM patients p "
      "JOIN insurers i ON i.id = p.insurer_id WHERE i.name = '{insurer}'", (
          "What was the average age of {insurer} policyholders at the start of 2025, to one decimal?",
          "On 2025-01-01, how old were patients insured by {insurer} on average (one decimal)?",
          "Give the mean age in years, rounded to one decimal, of {insurer} patients as of 2025-01-01.")),
)

__all__ = ["FAMILIES", "Family", "JOIN_HOSPITAL"]
